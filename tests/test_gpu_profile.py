"""The gpu profile's training path (mBART, mT5, LED, XLM-R) on tiny stand-ins, on CPU.

Each test names the fault it guards against: a launched job's learning rate read back as
text, a loss multiplied by the accumulation steps or the number of DDP processes, LED
without global attention, rescaled BERTScore outside its declared range, a
sentencepiece-only tokenizer that cannot load, fp16 or a GPU launcher asked for where no
GPU is. The whole profile, run end to end on the stand-ins: ``tests/test_gpu_rehearsal.py``.
"""

from __future__ import annotations

import json
import warnings

import pytest

from saf_utils.training import jobs as J
from saf_utils.training import launchers
from saf_utils.training.seq2seq import Seq2SeqSettings, precision, train_seq2seq

MBART = "facebook/mbart-large-cc25"
LED = "allenai/led-base-16384"
MT5 = "google/mt5-base"


@pytest.fixture(autouse=True)
def _cpu_offline(monkeypatch):
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TQDM_DISABLE"):
        monkeypatch.setenv(key, "1")


# ------------------------------------------------------------------ job files keep types


def test_a_launched_job_reads_back_every_value_with_its_type(tmp_path):
    """``json.dumps`` writes 5e-5 as ``5e-05``, which a YAML reader takes for a string;
    the launched job then handed AdamW a text learning rate."""
    job = J.TrainJob(examples="x.jsonl", output_dir=str(tmp_path), kind="cross_encoder",
                     settings={"learning_rate": 5e-5, "epochs": 2, "fp16": True})
    path = tmp_path / J.CONFIG_FILE
    path.write_text(json.dumps(job.to_dict()))  # what run_job writes for a launcher
    assert "5e-05" in path.read_text()
    back = J.TrainJob.load(path)
    assert back == job
    settings = back.kind_settings()
    assert settings.learning_rate == 5e-5 and isinstance(settings.learning_rate, float)


def test_a_setting_of_the_wrong_type_is_an_error_naming_the_field():
    with pytest.raises(ValueError, match="learning_rate"):
        J.TrainJob(examples="x", output_dir="o", settings={"learning_rate": "5e-05"})
    with pytest.raises(ValueError, match="epochs"):
        J.TrainJob(examples="x", output_dir="o", kind="cross_encoder",
                   settings={"epochs": "2"})
    # an int for a float field is cast, not refused
    job = J.TrainJob(examples="x", output_dir="o", settings={"learning_rate": 1, "epochs": 2})
    assert isinstance(job.kind_settings().learning_rate, float)
    assert isinstance(job.kind_settings().epochs, float)


# ------------------------------------------------------------------ loss scaling


def _first_step(log: dict) -> dict:
    return next(h for h in log["log_history"] if "loss" in h)


def test_gradient_accumulation_gives_the_loss_and_gradient_of_one_batch(standin):
    """Batch 1 x accumulation 4 = batch 4 x 1 on the same four examples (equal target
    lengths, no dropout): the Trainer had stopped dividing by the accumulation steps."""
    sources = ["Frage: Was ist ein Vertrag?", "Antwort: Eine Einigung.",
               "Frage: Wer haftet?", "Antwort: Der Schuldner haftet."]
    targets = ["Die Antwort ist richtig."] * 4
    base = dict(model=str(standin(MBART)), src_lang="de_DE", tgt_lang="de_DE", max_steps=1,
                logging_steps=1, learning_rate=5e-5, seed=1, max_target_length=16)
    one = _first_step(train_seq2seq(sources, targets, Seq2SeqSettings(
        **base, batch_size=4, grad_accum=1))[2])
    four = _first_step(train_seq2seq(sources, targets, Seq2SeqSettings(
        **base, batch_size=1, grad_accum=4))[2])
    assert four["loss"] == pytest.approx(one["loss"], rel=1e-4)
    assert four["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-3)


def test_trainers_take_the_models_loss_as_a_mean():
    """The cross-encoder's Trainer had kept token averaging across DDP processes on (every
    XLM-R job logged 2 x ln 3 under torchrun:2) and both Trainers skipped the division by
    the accumulation steps; one function sets both for every Trainer."""
    from saf_utils.training.cross_encoder import CrossEncoderSettings
    from saf_utils.training.seq2seq import configure_trainer, training_arguments

    class _Trainer:
        model_accepts_loss_kwargs = True

        def remove_callback(self, _cb):
            pass

    assert configure_trainer(_Trainer()).model_accepts_loss_kwargs is False
    assert not training_arguments(CrossEncoderSettings(), "o").average_tokens_across_devices
    assert not training_arguments(Seq2SeqSettings(), "o").average_tokens_across_devices


# ------------------------------------------------------------------ LED


def test_led_trains_and_decodes_with_global_attention_on_the_first_token(standin,
                                                                         monkeypatch):
    """LED's tokenizer loads as a RobertaTokenizer, so the old test of the tokenizer's
    class name never gave LED global attention; the stock collator could not pad it."""
    from saf_utils.training.seq2seq import generate, is_led, seq2seq_collator

    settings = Seq2SeqSettings(model=str(standin(LED)), max_steps=2, batch_size=2,
                               max_target_length=8, logging_steps=1)
    sources = ["kurz", "ein viel längerer Satz mit mehr Wörtern als der erste", "a", "b c"]
    model, tok, log = train_seq2seq(sources, ["ja", "nein", "ja", "nein"], settings)
    assert is_led(model) and log["global_attention"] == "first token"
    batch = seq2seq_collator(tok, model)([
        {"input_ids": [0, 5, 2], "attention_mask": [1, 1, 1], "global_attention_mask": [1, 0, 0],
         "labels": [5, 2]},
        {"input_ids": [0, 2], "attention_mask": [1, 1], "global_attention_mask": [1, 0],
         "labels": [2]}])
    assert batch["global_attention_mask"].tolist() == [[1, 0, 0], [1, 0, 0]]
    seen = []
    original = type(model).generate

    def spy(self, *args, **kwargs):
        seen.append(kwargs["global_attention_mask"][:, 0].tolist())
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(model), "generate", spy)
    generate(model, tok, sources, settings, batch_size=2)
    assert seen and all(all(v == 1 for v in first) for first in seen)
    assert not is_led(train_seq2seq.__globals__["build_seq2seq"](
        Seq2SeqSettings(model=str(standin(MBART))))[0])


# ------------------------------------------------------------------ BERTScore's range


def test_rescaled_bertscore_is_its_own_metric_on_its_real_range(monkeypatch):
    """Rescaled scores fall below 0 (405 of 1,060 items once), so they cannot be reported
    as ``bertscore_f1`` on 0-1: ``bertscore_f1`` is never rescaled, the rescaled one has
    its own name, no bounds (intervals unclipped for every system alike), and is scored
    only where bert-score ships a baseline."""
    from saf_utils.metrics import base, embedding
    from saf_utils.saf import scores as EV

    assert base.bounds("bertscore_f1") == (0.0, 1.0)
    assert base.bounds("bertscore_f1_rescaled") is None
    calls = []
    monkeypatch.setattr(embedding, "bertscore", lambda h, r, **kw: (
        calls.append(kw["rescale"]) or {"f1_per_pair": [0.5] * len(h)}))
    base.metric("bertscore_f1").items(["a"], ["b"], model_type=MBART_BERT, lang="de")
    base.metric("bertscore_f1_rescaled").items(["a"], ["b"], model_type=MBART_BERT, lang="de")
    assert calls == [False, True]
    with_baseline = EV.bertscore_settings("de", MBART_BERT, 9)
    without = EV.bertscore_settings("de", None)
    assert "bertscore_f1_rescaled" in EV._scored(True, None, bertscore_kwargs=with_baseline)
    assert "bertscore_f1_rescaled" not in EV._scored(True, None, bertscore_kwargs=without)
    with pytest.raises(ValueError, match="baseline"):
        embedding.bertscore_rescaled_items(["a"], ["b"], model_type=None, lang="de")


MBART_BERT = "bert-base-multilingual-cased"


# ------------------------------------------------------------------ tokenizers, precision


def test_a_sentencepiece_only_model_loads_its_tokenizer(standin):
    """The hub's mT5 ships ``spiece.model`` and no ``tokenizer.json``: the fast tokenizer
    is converted through protobuf (locked), else AutoTokenizer fails asking for tiktoken."""
    from transformers import AutoTokenizer

    folder = standin(MT5)
    assert (folder / "spiece.model").is_file() and not (folder / "tokenizer.json").exists()
    tok = AutoTokenizer.from_pretrained(folder)
    assert type(tok).__name__ == "T5Tokenizer"
    assert tok("Die Antwort ist richtig.")["input_ids"][-1] == tok.eos_token_id


def test_fp16_without_cuda_warns_and_the_log_says_fp32():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert precision(Seq2SeqSettings(fp16=True)) == "fp32"
    assert any("no CUDA" in str(w.message) for w in caught)
    assert precision(Seq2SeqSettings()) == "fp32"


@pytest.mark.parametrize("launcher", ["torchrun:gpu", "accelerate:2"])
def test_a_gpu_launcher_without_a_gpu_is_a_planning_error(launcher):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(ValueError, match="GPU"):
        launchers.check_launcher(launcher)
    launchers.check_launcher("torchrun:2")
    launchers.check_launcher("none")
    for bad in ("torchrun", "torchrun:0", "mpirun:2"):
        with pytest.raises(ValueError):
            launchers.check_launcher(bad)


# ------------------------------------------------------------------ DDP parity


def _parity_job(tmp_path, kind: str, folder, batch_size: int) -> J.TrainJob:
    ids = [1, 2, 3, 4]
    sources = ["Eine Einigung.", "Der Schuldner.", "Ein Vertrag ist das.", "Niemand."]
    targets = (["Correct", "Incorrect", "Correct", "Partially correct"] if kind != "seq2seq"
               else ["Die Antwort ist richtig."] * 4)  # equal lengths: a mean of means
    pairs = ["Eine Einigung zweier Parteien."] * 4 if kind != "seq2seq" else None
    train = J.Examples(ids, sources, targets, pairs)
    evals = {"val": J.Examples([9], ["Ja."], [targets[0]], pairs[:1] if pairs else None)}
    examples = J.write_examples(tmp_path / f"{kind}-{batch_size}.jsonl", train, evals)
    settings = ({"model": str(folder), "epochs": 1, "max_length": 32, "freeze_layers": 0,
                 "cache_frozen": False, "labels": ["Correct", "Incorrect",
                                                   "Partially correct"]}
                if kind != "seq2seq" else
                {"model": str(folder), "max_steps": 1, "src_lang": "de_DE",
                 "tgt_lang": "de_DE", "max_target_length": 16, "eval_batch_size": 1})
    return J.TrainJob(examples=str(examples), output_dir=str(tmp_path / f"{kind}-{batch_size}"),
                      kind=kind, save_model=False, seed=3,
                      settings={**settings, "batch_size": batch_size, "logging_steps": 1,
                                "learning_rate": 5e-5})


@pytest.mark.slow
@pytest.mark.parametrize("kind,hub_id", [("cross_encoder", "xlm-roberta-base"),
                                         ("seq2seq", MBART)])
def test_two_ddp_processes_log_the_kernels_loss(tmp_path, standin, monkeypatch, kind, hub_id):
    """Batch 4 in the kernel = 2 x 2 under ``torchrun --nproc_per_node 2`` on the same four
    examples: the cross-encoder had logged 2 x ln 3 under DDP (loss x world size)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    folder = standin(hub_id)
    kernel = J.run_job(_parity_job(tmp_path, kind, folder, 4), log=lambda line: None)
    ddp = J.run_job(_parity_job(tmp_path, kind, folder, 2), launcher="torchrun:2",
                    log=lambda line: None)
    assert ddp.log["summary"]["world_size"] == 2
    assert _first_step(ddp.log)["loss"] == pytest.approx(_first_step(kernel.log)["loss"],
                                                         rel=1e-4)
