"""The two ArgSciChat tasks as the runner and the pages see them
(:class:`saf_utils.taskspec.TaskSpec`)."""

from __future__ import annotations

from saf_utils.argscichat.data import ARGSCICHAT_FOLDS, ARGSCICHAT_SPLITS, _argscichat_cache_dir
from saf_utils.taskspec import DataSource, TaskSpec


def cached(_hub: str) -> bool:
    """Are all official fold files in the local download cache?"""
    cache = _argscichat_cache_dir()
    return all((cache / f"fold_{k}_{s}.json").is_file()
               for k in ARGSCICHAT_FOLDS for s in ARGSCICHAT_SPLITS)


ARGSCICHAT_SOURCE = DataSource("argscichat", "argscichat_source", "ARGSCICHAT_DATA",
                               "github (pinned commit)", "raw.githubusercontent.com", cached)

SPECS = (
    TaskSpec("argscichat_fact_selection", "ArgSciChat fact selection", ("fact_f1",),
             ARGSCICHAT_SPLITS, ("03_fact_selection", "06_argscichat_error_analysis"),
             ARGSCICHAT_SOURCE),
    # content-word F1 leads: a constant string of frequent words games Message-F1
    TaskSpec("argscichat_generation", "ArgSciChat generation",
             ("content_f1", "bertscore_f1", "message_f1"), ARGSCICHAT_SPLITS,
             ("04_generation", "06_argscichat_error_analysis"), ARGSCICHAT_SOURCE),
)

#: notebook -> "module:function" listing the systems it runs with its parameters, each with
#: the parameters it runs with (:data:`saf_utils.saf.spec.PLANNED_SYSTEMS`).
PLANNED_SYSTEMS = {"03_fact_selection": "saf_utils.argscichat.run:planned_selectors",
                   "04_generation": "saf_utils.argscichat.run:planned_reply_systems"}
