"""The SAF task as the runner and the pages see it (:class:`saf_utils.taskspec.TaskSpec`)."""

from __future__ import annotations

import os
from pathlib import Path

from saf_utils.saf.data import SAF_HUB_ID, SAF_SPLITS, looks_like_path
from saf_utils.taskspec import DataSource, Published, TaskSpec


def hf_cached(dataset_id: str) -> bool:
    """Is a hub dataset in the local Hugging Face cache (hub or datasets layout)?"""
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    hub = Path(os.environ.get("HF_HUB_CACHE") or home / "hub")
    ds = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets")
    return ((hub / f"datasets--{dataset_id.replace('/', '--')}").is_dir()
            or (ds / dataset_id.replace("/", "___")).is_dir())


SAF_SOURCE = DataSource("saf", "saf_source", "SAF_DATA", SAF_HUB_ID, "huggingface.co",
                        hf_cached, is_hub_id=lambda v: not looks_like_path(v))

#: Published numbers: the mBART model cards on the Hugging Face hub (Filighera et al., ACL
#: 2022), cited, never measured here. Percent, as on the cards; BERTScore there uses another
#: model, ROUGE-2 and METEOR other implementations, so only the label metrics and SacreBLEU
#: are comparable. No system run here is the cards' mBART, and neither the cards nor the
#: dataset card publish a majority baseline, so no SAF entry is a reproduction check
#: (``measured`` stays empty).
_CARD = "https://huggingface.co/Short-Answer-Feedback/mbart-finetuned-saf-"
_CARD_METRICS = ("sacrebleu", "rouge2", "meteor", "bertscore_f1", "accuracy", "weighted_f1",
                 "macro_f1")
SAF_PUBLISHED = tuple(
    Published(f"mBART {domain} card", f"hub model card mbart-finetuned-saf-{domain}",
              _CARD + domain, dataset, split, "percent",
              tuple(zip(_CARD_METRICS, values, strict=True)),
              comparable=("accuracy", "weighted_f1", "macro_f1", "sacrebleu"))
    for domain, dataset, split, values in (
        ("legal-domain", "saf_legal_domain_german", "test_unseen_answers",
         (43.6, 45.3, 57.4, 55.0, 81.0, 79.4, 71.3)),
        ("legal-domain", "saf_legal_domain_german", "test_unseen_questions",
         (3.0, 4.2, 19.9, 16.1, 60.0, 54.4, 53.2)),
        ("micro-job", "saf_micro_job_german", "test_unseen_answers",
         (39.5, 29.8, 63.3, 63.1, 80.1, 80.3, 80.7)),
        ("micro-job", "saf_micro_job_german", "test_unseen_questions",
         (0.3, 0.5, 33.8, 31.3, 48.7, 46.5, 40.6)),
    )
)

SPECS = (
    TaskSpec("saf", "SAF (short answer feedback)", ("accuracy", "macro_f1", "sacrebleu"),
             SAF_SPLITS, ("01_data_exploration", "02_baseline_finetuning",
                          "05_saf_error_analysis"), SAF_SOURCE, published=SAF_PUBLISHED,
             systems=("saf_utils.saf.systems:SYSTEMS",),
             split_notes=(("test_unseen_questions",
                           "SacreBLEU (0-100) is near 0 on unseen questions, for the published "
                           "cards too: feedback written for questions not seen in training "
                           "shares few n-grams with the gold feedback."),)),
)

#: notebook -> "module:function" giving ``{system: {parameter: value}}`` of what the notebook
#: runs with its parameters (``saf-run --dry-run`` prints it).
PLANNED_SYSTEMS = {"02_baseline_finetuning": "saf_utils.saf.experiments:planned_systems"}
