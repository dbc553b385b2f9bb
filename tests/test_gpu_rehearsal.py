"""A rehearsal of the gpu profile: ``saf-run --profile gpu`` for 02, 03 and 04, on CPU and
offline, with tiny stand-ins of every model it names (:mod:`tests.standins`) resolved
under the profile's own hub ids from an offline hub cache.

What a user with a GPU runs, only the sizes cut (20 rows per split, 40 training rows, fold
0, 2 epochs); the profile's grids, seeds, languages, lengths and beams stay. The launcher
is the one change: ``torchrun:gpu`` is refused at planning without a GPU, so the rehearsal
runs the jobs in the kernel and under ``torchrun:2`` (gloo). What it does not show: fp16
(CPU trains fp32 and says so), NCCL, the real models' memory and time
(``benchmarks/gpu_check.sh`` on a GPU machine covers those).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from notebook_reports.manifest import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.realdata]
NOTEBOOKS = ("02_baseline_finetuning", "03_fact_selection", "04_generation")


def rehearsal_profile(path: Path) -> Path:
    """configs/gpu.yaml with only its sizes cut, as a profile file that extends it."""
    gpu = yaml.safe_load((PROJECT_ROOT / "configs" / "gpu.yaml").read_text())
    nb = copy.deepcopy(gpu["notebook_parameters"])
    nb["02_baseline_finetuning"]["max_train_rows"] = 40
    nb["02_baseline_finetuning"]["system_params"]["seq2seq:"]["settings"]["epochs"] = 2
    nb["04_generation"]["system_params"]["seq2seq"]["settings"]["epochs"] = 2.0
    path.write_text(yaml.safe_dump({
        "extends": str(PROJECT_ROOT / "configs" / "gpu.yaml"), "name": "gpu-rehearsal",
        "description": "the gpu profile on tiny stand-ins, only sizes cut",
        "parameters": {"max_rows": 20, "folds": [0]}, "notebook_parameters": nb,
        "reuse": None}))
    return path


def shared_texts() -> list[str]:
    """German SAF answers, feedback and references, and ArgSciChat papers and replies."""
    saf = Path(os.environ["SAF_DATA"])
    train = pd.read_parquet(sorted((saf / "data").glob("train-*.parquet"))[0])
    texts = [*train.provided_answer[:300], *train.answer_feedback[:300],
             *train.reference_answer.unique()]
    fold = json.loads((Path(os.environ["ARGSCICHAT_DATA"]) / "fold_0_train.json").read_text())
    for paper in list(fold.values())[:4]:
        texts += paper["content"][:100] + [m["DE_Message"] for m in paper["message_pairs"]]
    return [str(t) for t in texts]


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Path:
    """An offline hub cache holding a stand-in under every hub id of the gpu profile."""
    if not (os.environ.get("SAF_DATA") and os.environ.get("ARGSCICHAT_DATA")):
        pytest.skip("needs SAF_DATA and ARGSCICHAT_DATA (local data copies)")
    from tests.standins import build_standins

    root = tmp_path_factory.mktemp("gpu-standins")
    build_standins(root / "models", shared_texts(), root / "hub")
    return root / "hub"


@pytest.mark.parametrize("launcher", ["none", "torchrun:2"])
def test_the_gpu_profile_runs_every_system_on_stand_ins(hub, tmp_path, monkeypatch, launcher):
    from notebook_reports import cli

    for key in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(key, "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(hub))
    profile = rehearsal_profile(tmp_path / "gpu-rehearsal.yaml")
    code = cli.main(["--config", str(profile), "--only", ",".join(NOTEBOOKS),
                     "-p", f"launcher={launcher}", "--reports-dir", str(tmp_path / "reports"),
                     "--run-name", "r"])
    run = tmp_path / "reports" / "r"
    manifest = json.loads((run / "manifest.json").read_text())
    status = {n["name"]: n["status"] for n in manifest["notebooks"]}
    assert code == 0, status
    assert status == dict.fromkeys(NOTEBOOKS, "ok")

    # every system of 02 predicted every row, and has records
    preds = pd.read_json(run / "02_baseline_finetuning" /
                         "predictions_test_unseen_answers.jsonl.gz", lines=True)
    systems = set(preds.system)
    assert {"seq2seq:mbart-large-cc25", "seq2seq:mt5-base", "cross_encoder",
            "feature_clf:stacked", "majority", "label_oracle"} <= systems
    records = [json.loads(line) for line in
               open(run / "02_baseline_finetuning" / "records.jsonl", encoding="utf-8")]
    assert systems <= {r.get("system") for r in records}
    assert any(r.get("metric") == "bertscore_f1_rescaled" for r in records)
    results = [r for r in records if r.get("kind") == "result"]
    assert all(0 <= r["value"] <= 1 for r in results
               if r["metric"] == "bertscore_f1" and r["value"] is not None)

    # the trained models ran with the profile's recipe and said what they ran
    logs = sorted((run / "02_baseline_finetuning").rglob("train_log.json"))
    world = 1 if launcher == "none" else 2
    for path in logs:
        summary = json.loads(path.read_text())["summary"]
        assert summary["precision"] == "fp32" and summary["world_size"] == world
    mbart = next(p for p in logs if "mbart" in str(p))
    settings = json.loads(mbart.read_text())["summary"]["settings"]
    assert (settings["grad_accum"], settings["src_lang"], settings["learning_rate"]) == (
        4, "de_DE", 5e-5)
    led_logs = sorted((run / "04_generation").rglob("train_log.json"))
    assert len(led_logs) == 3  # the profile's three LED seeds on fold 0
    for path in led_logs:
        summary = json.loads(path.read_text())["summary"]
        assert summary["global_attention"] == "first token"
        assert summary["settings"]["num_beams"] == 4

    # 03 and 04: every system predicted
    replies = pd.read_json(next((run / "04_generation").glob("generations*.jsonl*")), lines=True)
    assert {"seq2seq", "copy_selected", "nearest_reply"} <= set(replies.system)

    # every model the run loaded is named with its revision in the manifest
    models = {m["model"]: m for n in manifest["notebooks"]
              for m in (n.get("inputs") or {}).get("models", [])}
    for hub_id in ("facebook/mbart-large-cc25", "google/mt5-base", "xlm-roberta-base",
                   "allenai/led-base-16384", "bert-base-multilingual-cased"):
        assert models[hub_id]["source"] == "hub cache" and len(models[hub_id]["revision"]) == 40
