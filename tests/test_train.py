"""The training entry point ``python -m saf_utils.training.process_entry``: in-process identity,
torchrun with 2 CPU processes, a failing rank.

The torchrun tests start real launchers (gloo backend, no GPU) on the fixtures with a tiny
scratch T5; each takes about 15 s on 2 shared cores. The jobs layer's other parts:
``tests/test_jobs.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from saf_utils.data import artifacts as AR
from saf_utils.training import jobs as T
from saf_utils.training import launchers
from saf_utils.training import process_entry as TR
from saf_utils.training.seq2seq import Seq2SeqSettings, generate, train_seq2seq

FIXTURES = Path(__file__).parent / "fixtures"
# 40 steps at a high rate: enough for non-empty outputs on the 5 training rows.
TINY = dict(model="scratch", max_steps=40, learning_rate=5e-3, batch_size=4, logging_steps=10,
            scratch_vocab_size=200, scratch_d_model=32, scratch_heads=2, scratch_ff=64,
            scratch_layers=1, max_source_length=64, max_target_length=12, eval_batch_size=1)
SAF_SPLITS = {"validation": ["v1", "v2"], "test_unseen_answers": ["a1", "a2", "a3"],
              "test_unseen_questions": ["q1", "q2"]}


@pytest.fixture(autouse=True)
def _cpu_offline(monkeypatch):
    """No GPU, no network, one thread per process (torchrun sets OMP_NUM_THREADS=1 for its
    ranks; in the test process several threads on 2 shared cores only thrash)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "TQDM_DISABLE"):
        monkeypatch.setenv(key, "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv(TR.FAIL_ENV, raising=False)
    yield
    torch.set_num_threads(threads)


def saf_examples(path: Path) -> Path:
    """The SAF fixtures' examples, as the SAF task writes them for its jobs."""
    from saf_utils.saf import formats as S
    from saf_utils.saf.data import load_saf

    saf = load_saf(FIXTURES / "saf_csv")

    def examples(split: str) -> T.Examples:
        df = S.saf_frame(saf[split], split)
        return T.Examples(df["id"].tolist(), *S.format_examples(df))

    return T.write_examples(path, examples("train"), {s: examples(s) for s in SAF_SPLITS})


def saf_job(out: Path, **extra) -> dict:
    return {"task": "saf", "examples": str(saf_examples(out.parent / f"{out.name}.jsonl")),
            "output_dir": str(out), "seed": 3, "settings": dict(TINY), **extra}


def test_ranks_build_identical_scratch_tokenizers():
    """Every DDP rank trains its own scratch tokenizer: scores, not only ids, must agree, or
    the ranks (and rank 0's saved tokenizer) segment unseen text differently."""
    from saf_utils.saf import formats as S
    from saf_utils.saf.data import load_saf
    from saf_utils.training.seq2seq import train_scratch_tokenizer

    saf = load_saf(FIXTURES / "saf_csv")
    texts = sum(S.format_examples(S.saf_frame(saf["train"], "train")), [])
    unseen = S.format_examples(S.saf_frame(saf["test_unseen_questions"], "x"))[0]
    toks = [train_scratch_tokenizer(texts, 200) for _ in range(4)]
    assert len({t.backend_tokenizer.to_str() for t in toks}) == 1
    assert len({str(t(unseen)["input_ids"]) for t in toks}) == 1


@pytest.mark.slow
def test_main_in_process_equals_direct_calls(tmp_path):
    """``python -m saf_utils.training.process_entry`` in one process = the notebook's direct calls,
    bit for bit."""
    from saf_utils.saf import formats as S
    from saf_utils.saf.data import load_saf

    out = tmp_path / "job"
    cfg = tmp_path / "job.json"
    cfg.write_text(json.dumps(saf_job(out, save_model=False)))
    assert TR.main([str(cfg)]) == 0
    rows = [json.loads(line) for line in AR.read_text(out / T.OUTPUT_FILE).splitlines()]
    log = json.loads((out / T.LOG_FILE).read_text())
    assert not (out / T.MODEL_DIR).exists()

    saf = load_saf(FIXTURES / "saf_csv")
    train = S.saf_frame(saf["train"], "train")
    settings = Seq2SeqSettings(**{**TINY, "seed": 3})
    model, tok, direct_log = train_seq2seq(*S.format_examples(train), settings)
    direct = []
    for split in SAF_SPLITS:
        df = S.saf_frame(saf[split], split)
        src, tgt = S.format_examples(df)
        direct += [{"task": "saf", "system": "seq2seq", "seed": 3, "fold": None, "split": split,
                    "id": i, "source": s, "output": o, "target": t} for i, s, o, t in
                   zip(df.id, src, generate(model, tok, src, settings), tgt, strict=True)]
    assert rows == direct
    assert any(r["output"] for r in rows)
    assert log["summary"]["train_loss"] == direct_log["train_loss"]
    assert log["summary"]["world_size"] == 1
    assert [h["step"] for h in log["log_history"] if "loss" in h] == [10, 20, 30, 40]


@pytest.mark.slow
def test_torchrun_two_processes_match_one(tmp_path):
    """Every input exactly once, in order; the gathered outputs are what the saved model
    generates in one process; train loss close to the single-process run."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    lines: list[str] = []
    two = T.run_job(saf_job(tmp_path / "two"), launcher="torchrun:2", log=lines.append)
    assert any("2 process(es)" in line for line in lines)
    assert (tmp_path / "two" / launchers.LAUNCHER_LOG).read_text().count("[train]") == 2
    one = T.run_job(saf_job(tmp_path / "one", save_model=False))
    assert two.log["summary"]["world_size"] == 2
    p1, p2 = one.predictions, two.predictions
    assert list(p2.id) == [i for ids in SAF_SPLITS.values() for i in ids]
    assert list(p2.split) == list(p1.split) and list(p2.id) == list(p1.id)
    assert list(p2.source) == list(p1.source) and list(p2.target) == list(p1.target)
    # Gathering: rank 0's saved model, generating alone, gives the same outputs.
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "two" / T.MODEL_DIR)
    tok = AutoTokenizer.from_pretrained(tmp_path / "two" / T.MODEL_DIR)
    settings = Seq2SeqSettings(**TINY)
    assert generate(model, tok, list(p2.source), settings) == list(p2.output)
    # DDP doubles the effective batch (and shuffles differently): not the same run, but
    # the loss must land close (measured: 2.40 vs 2.59 after 40 steps).
    l1, l2 = one.log["summary"]["train_loss"], two.log["summary"]["train_loss"]
    assert abs(l2 - l1) / l1 < 0.25, (l1, l2)


@pytest.mark.slow
def test_a_crashing_rank_fails_the_run_with_its_message(tmp_path, monkeypatch):
    monkeypatch.setenv(TR.FAIL_ENV, "1")
    with pytest.raises(T.TrainJobError, match=r"rank 1 failed: RuntimeError: injected failure"):
        T.run_job(saf_job(tmp_path / "crash"), launcher="torchrun:2", log=lambda line: None)
    assert (tmp_path / "crash" / "rank1.error").is_file()
    assert not (tmp_path / "crash" / T.OUTPUT_FILE).exists()
