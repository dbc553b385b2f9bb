"""The two ArgSciChat tasks as the runner and the pages see them
(:class:`saf_utils.taskspec.TaskSpec`)."""

from __future__ import annotations

from saf_utils.argscichat.data import ARGSCICHAT_FOLDS, ARGSCICHAT_SPLITS, _argscichat_cache_dir
from saf_utils.taskspec import DataSource, Published, TaskSpec


def cached(_hub: str) -> bool:
    """Are all official fold files in the local download cache?"""
    cache = _argscichat_cache_dir()
    return all((cache / f"fold_{k}_{s}.json").is_file()
               for k in ARGSCICHAT_FOLDS for s in ARGSCICHAT_SPLITS)


ARGSCICHAT_SOURCE = DataSource("argscichat", "argscichat_source", "ARGSCICHAT_DATA",
                               "github (pinned commit)", "raw.githubusercontent.com", cached)

#: Published numbers of the ArgSciChat paper (Ruggeri, Mesgar and Gurevych), cited, never
#: measured here: the fact-selection baselines' Fact-F1 (0-1) on the official test folds,
#: each beside the registered selector that implements it (``measured``). The LED reply
#: baseline's numbers are in the paper's generation table, which was not at hand offline, so
#: they are not quoted (None) and the pages say where they are published.
_PAPER = ("Ruggeri et al., A Dataset of Argumentative Dialogues on Scientific Papers "
          "(ArgSciChat), ACL 2023")
_PAPER_URL = "https://arxiv.org/abs/2202.06690"
SELECTION_PUBLISHED = tuple(
    Published(system, _PAPER, _PAPER_URL, "argscichat", "test", "0-1",
              (("fact_f1", value),), comparable=("fact_f1",), measured=measured)
    for system, measured, value in (("First", "first", 0.079), ("TF-IDF", "tfidf", 0.162),
                                    ("SBERT", "sbert", 0.162)))
GENERATION_PUBLISHED = (
    Published("LED", _PAPER, _PAPER_URL, "argscichat", "test", "0-1",
              (("message_f1", None), ("bertscore_f1", None), ("moverscore", None)),
              unquoted="published in the paper's message-generation table (arXiv:2202.06690, "
              "ACL 2023); it could not be quoted here: no copy of the table was at hand "
              "when the numbers were collected"),
)

SPECS = (
    TaskSpec("argscichat_fact_selection", "ArgSciChat fact selection", ("fact_f1",),
             ARGSCICHAT_SPLITS, ("03_fact_selection", "06_argscichat_error_analysis"),
             ARGSCICHAT_SOURCE, published=SELECTION_PUBLISHED,
             systems=("saf_utils.argscichat.selectors:SELECTORS",)),
    TaskSpec("argscichat_generation", "ArgSciChat generation",
             ("content_f1", "message_f1", "bertscore_f1", "moverscore"), ARGSCICHAT_SPLITS,
             ("04_generation", "06_argscichat_error_analysis"), ARGSCICHAT_SOURCE,
             published=GENERATION_PUBLISHED,
             systems=("saf_utils.argscichat.replies:REPLY_SYSTEMS",),
             headline_note="Content-word F1 leads: a constant string of frequent words "
             "scores well on Message-F1 without answering anything. Message-F1, BERTScore "
             "and MoverScore (the paper's metrics) follow."),
)

#: notebook -> "module:function" listing the systems it runs with its parameters, each with
#: the parameters it runs with (:data:`saf_utils.saf.spec.PLANNED_SYSTEMS`).
PLANNED_SYSTEMS = {"03_fact_selection": "saf_utils.argscichat.experiments:planned_selectors",
                   "04_generation": "saf_utils.argscichat.experiments:planned_reply_systems"}
