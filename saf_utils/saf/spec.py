"""The SAF task as the runner and the pages see it (:class:`saf_utils.taskspec.TaskSpec`)."""

from __future__ import annotations

import os
from pathlib import Path

from saf_utils.saf.data import SAF_HUB_ID, SAF_SPLITS, looks_like_path
from saf_utils.taskspec import DataSource, TaskSpec


def hf_cached(dataset_id: str) -> bool:
    """Is a hub dataset in the local Hugging Face cache (hub or datasets layout)?"""
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    hub = Path(os.environ.get("HF_HUB_CACHE") or home / "hub")
    ds = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets")
    return ((hub / f"datasets--{dataset_id.replace('/', '--')}").is_dir()
            or (ds / dataset_id.replace("/", "___")).is_dir())


SAF_SOURCE = DataSource("saf", "saf_source", "SAF_DATA", SAF_HUB_ID, "huggingface.co",
                        hf_cached, is_hub_id=lambda v: not looks_like_path(v))

SPECS = (
    TaskSpec("saf", "SAF (short answer feedback)", ("accuracy", "macro_f1", "sacrebleu"),
             SAF_SPLITS, ("01_data_exploration", "02_baseline_finetuning",
                          "05_saf_error_analysis"), SAF_SOURCE),
)

#: notebook -> "module:function" listing the systems it runs with its parameters, each with
#: the parameters it runs with (``fn(notebook parameters) -> {system: {parameter: value}}``):
#: what the notebook runs and ``saf-run --dry-run`` prints.
PLANNED_SYSTEMS = {"02_baseline_finetuning": "saf_utils.saf.run:planned_systems"}
