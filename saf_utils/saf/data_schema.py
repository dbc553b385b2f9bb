"""What a SAF dataset is: its splits, columns, labels, anomaly kinds, and its error
(re-exported by :mod:`saf_utils.saf.data`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from saf_utils.data.provenance import DataError


class SAFDataError(DataError):
    """One or more problems in a SAF dataset, all reported together."""

    def __init__(self, problems: Sequence[str], source: str = "", limit: int = 20):
        self.problems = list(problems)
        head = "\n  - ".join(self.problems[:limit])
        more = len(self.problems) - limit
        tail = f"\n  ... and {more} more problem(s)" if more > 0 else ""
        where = f" in {source}" if source else ""
        super().__init__(f"{len(self.problems)} problem(s){where}:\n  - {head}{tail}")


class SAFDataWarning(UserWarning):
    """A SAF dataset loaded with content anomalies (counted, see ``return_report``)."""


SAF_HUB_ID = "Short-Answer-Feedback/saf_legal_domain_german"
SAF_SPLITS = ("train", "validation", "test_unseen_answers", "test_unseen_questions")
SAF_LABELS = ("Correct", "Partially correct", "Incorrect")
SAF_COLUMNS = (
    "id",
    "question",
    "reference_answer",
    "provided_answer",
    "answer_feedback",
    "verification_feedback",
    "score",
)
SAF_OPTIONAL_COLUMNS = ("error_class",)
#: Content anomalies that are loaded and counted (``strict=True``: problems).
SAF_ANOMALY_KINDS = ("empty_answer", "label_score_mismatch", "leak_answer_in_train",
                     "leak_question_seen", "extra_column")
#: Test splits checked for answers also in train; and the split whose questions must be unseen.
SAF_TEST_SPLITS = ("test_unseen_answers", "test_unseen_questions")
#: Columns of the anomaly report (one row per loaded split and kind, zero counts included).
REPORT_COLUMNS = ("split", "kind", "count", "ids", "rows", "files")
_SAF_SUFFIXES = (".parquet", ".jsonl", ".csv")
_SHARD = re.compile(r"^(?P<split>\w+?)-(?P<k>\d+)-of-(?P<n>\d+)(?:-[0-9a-f]+)?\.parquet$")
_REQUIRED_TEXT = ("question", "reference_answer", "answer_feedback")
