"""The jobs layer: configs, the examples file, job folders, launch commands, run_jobs.

The launchers themselves (torchrun with 2 processes, a failing rank) run in
``tests/test_train.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from saf_utils.training import jobs as J
from saf_utils.training import launchers

TINY = dict(model="scratch", max_steps=4, learning_rate=5e-3, batch_size=4,
            scratch_vocab_size=60, scratch_d_model=16, scratch_heads=2, scratch_ff=32,
            scratch_layers=1, max_source_length=32, max_target_length=6)


def examples() -> tuple[J.Examples, dict[str, J.Examples]]:
    train = J.Examples([1, 2, 3], ["a b", "b c", "c ä"], ["x", "y", "z"])
    return train, {"val": J.Examples(["v1"], ["a c"], ["x"]),
                   "test": J.Examples(["t1", "t2"], ["b b", "c"], ["y", "z"])}


def test_config_errors_and_launch_commands(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown job field"):
        J.TrainJob.from_dict({"examples": "e", "output_dir": "x", "sede": 1})
    with pytest.raises(ValueError, match="Seq2SeqSettings.*unknown parameter"):
        J.TrainJob(examples="e", output_dir="x", settings={"lr": 1})
    with pytest.raises(TypeError):
        J.TrainJob.from_dict({"output_dir": "x"})  # no examples file: no job
    cmd = launchers.launch_command("torchrun:2", "cfg.json")
    assert cmd[1:] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                       "-m", "saf_utils.training.process_entry", "cfg.json"]
    assert "--multi_gpu" in launchers.launch_command("accelerate:4", "c")
    assert "--multi_gpu" not in launchers.launch_command("accelerate", "c")
    with pytest.raises(ValueError, match="launcher"):
        launchers.launch_command("mpirun", "c")
    path = tmp_path / "job.yaml"
    path.write_text("examples: e.jsonl\noutput_dir: o\nfold: 0\nsettings: {max_steps: 2}\n")
    job = J.TrainJob.load(path)
    assert job.kind_settings().max_steps == 2 and job.fold == 0


def test_examples_roundtrip_keeps_order_and_id_types(tmp_path: Path) -> None:
    train, evals = examples()
    path = J.write_examples(tmp_path / "sub" / "ex.jsonl", train, evals)
    back_train, back_evals = J.read_examples(path)
    assert back_train == train and back_evals == evals and list(back_evals) == ["val", "test"]
    assert "ä" in path.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="train"):
        J.write_examples(tmp_path / "bad.jsonl", train, {"train": train})
    (tmp_path / "no_train.jsonl").write_text(json.dumps(
        {"split": "val", "id": 1, "source": "s", "target": "t"}) + "\n")
    with pytest.raises(ValueError, match="no training examples"):
        J.read_examples(tmp_path / "no_train.jsonl")


def test_examples_written_once_per_system_and_fold_jobs_per_seed(tmp_path: Path) -> None:
    base = J.TrainJob(examples="", output_dir=str(tmp_path), system="seq2seq:a/b", fold=2)
    job = J.with_examples(base, *examples())
    assert Path(job.examples) == tmp_path / "seq2seq_a_b" / "fold2-examples.jsonl.gz"
    grid = J.job_grid(job, [0, 1])
    assert [Path(j.output_dir) for j in grid] == [tmp_path / "seq2seq_a_b" / "fold2-seed0",
                                                  tmp_path / "seq2seq_a_b" / "fold2-seed1"]
    assert {j.examples for j in grid} == {job.examples} and [j.seed for j in grid] == [0, 1]
    plain = J.job_grid(J.TrainJob(examples="e", output_dir="o"), [5])[0]
    assert Path(plain.output_dir) == Path("o") / "seq2seq" / "seed5"


@pytest.mark.slow
def test_run_jobs_reads_only_the_examples_file(tmp_path: Path) -> None:
    job = J.with_examples(J.TrainJob(examples="", output_dir=str(tmp_path / "runs"),
                                     task="demo", fold=0, settings=dict(TINY),
                                     save_model=False), *examples())
    lines: list[str] = []
    preds, logs = J.run_jobs(J.job_grid(job, [0, 1]), log=lines.append)
    assert list(logs.seed) == [0, 1] and list(logs.fold) == [0, 0]
    assert {"train_loss", "train_steps", "seconds_total", "output_dir"} <= set(logs.columns)
    for seed in (0, 1):
        got = preds[preds.seed == seed]
        assert list(zip(got.split, got.id, got.source, strict=True)) == [
            ("val", "v1", "a c"), ("test", "t1", "b b"), ("test", "t2", "c")]
        assert set(got.task) == {"demo"} and set(got.fold) == {0}
    assert any("[train] demo seq2seq seed 0: 3 training pairs" in line for line in lines)
    back = J.load_result(logs.output_dir.iloc[1])
    assert back.predictions.equals(preds[preds.seed == 1].reset_index(drop=True))
