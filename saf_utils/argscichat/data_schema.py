"""The names of the ArgSciChat data: its errors, folds, splits, anomaly kinds and the records
the loader returns (:class:`MessagePair`, :class:`ArgSciChatFold`). The loader:
:mod:`saf_utils.argscichat.data`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from saf_utils.data.provenance import DataError
from saf_utils.data.reading import anomaly_report


class ArgSciChatDataError(DataError):
    """A missing, unreadable or malformed ArgSciChat file."""


class ArgSciChatDataWarning(UserWarning):
    """An ArgSciChat fold loaded with content anomalies (leakage; see ``return_report``)."""


ARGSCICHAT_REPO = "UKPLab/acl2023-argscichat"
ARGSCICHAT_COMMIT = "ad4680ec5ce5f274b3ddec05a237e39b33dc1bd5"
ARGSCICHAT_FOLDER = "argscichat_allennlp/argscichat_train_dev"
ARGSCICHAT_SPLITS = ("train", "val", "test")
ARGSCICHAT_FOLDS = (0, 1, 2, 3, 4)
# SHA-256 of the fold files at ARGSCICHAT_COMMIT, checked after a download.
ARGSCICHAT_SHA256 = {
    "fold_0_test.json": "93993d3aa60874a088934b61da7758c248ba4d9aeb46a17f1d4855d17b741b45",
    "fold_0_train.json": "2a8dc299534bd8fd9dea40e174027a4f09fd5c82183e4035860d738c03876c51",
    "fold_0_val.json": "558972aa0ef8c48a514ea786edcc405ecccf8c5af1fd4ab1f8b2e6c81be5f494",
    "fold_1_test.json": "9e7056e288b4c29632f56a3074b926e25b2f06a893aaed76d12794e63fe5c8be",
    "fold_1_train.json": "48862c2b2867b03a1f31e0159cc7f7b0b860995347136854a3454efc16fe8f41",
    "fold_1_val.json": "e9bfa8d4a7a51b03f15a8b6ae336557f525a64e5a67a4bb222413fc5aa372b75",
    "fold_2_test.json": "65ff2236b48829162f84f9bbc46e84c00f79b800b865e4d3694f3cce868a0814",
    "fold_2_train.json": "9de73a225f87c5f89a8c7505544abae3018b0dc1cd5f9410680e0611dbafb2c2",
    "fold_2_val.json": "ca9bf3f28ea35d73540d29e5b231a4e02cbec96b12ec634f20d9e10f41a7e1ae",
    "fold_3_test.json": "8ebc7495cdfc1994f5bce0c20b0553f25103378d4b416bc07f5204c61f58db60",
    "fold_3_train.json": "683d46868c41526ae4c2764d2794fd029bf01746214449ea766a31e1452627a6",
    "fold_3_val.json": "952af801e068edc4f0bd00045db78eccb53a50af1efd89fc453cd85459163dc0",
    "fold_4_test.json": "b0cc4f76fc9021a47536912804c8d23cbdb61ca68211b1480b89daf351b4211b",
    "fold_4_train.json": "25edf79cbbf46303a5d265e50dcca964ccc1dabab9314d8f2031a3d3416cdb08",
    "fold_4_val.json": "0ed87fb78ce9bc073673fa8ba56c547627427b4e4ca01caddde878be0c68171f",
}
#: Content anomalies that are loaded and counted (``strict=True``: errors); see docs/data.md.
ARGSCICHAT_ANOMALY_KINDS = ("leak_paper_content", "paper_key_not_title", "fact_not_found",
                            "history_fact_not_found", "history_longer_than_ids",
                            "history_id_unknown", "history_id_self", "extra_key")
#: Columns of the anomaly report (one row per split and kind, zero counts included).
ARGSCICHAT_REPORT_COLUMNS = ("fold", "split", "kind", "count", "ids", "files")
INTENT_COLUMNS = ("Role", "Message Number", "Sentence Number", "Sentence", "Tag")
#: Share of a paper's distinct content sentences found in one other paper that makes a leak.
LEAK_OVERLAP = 0.5
_PAIR_KEYS = ("id", "P_Message", "DE_Message", "facts", "history", "history_ids", "history_facts")
_PAPER_KEYS = ("id", "title", "content", "message_pairs")


@dataclass(frozen=True)
class MessagePair:
    """One proponent message and the domain expert's reply, with the paper it is about."""

    pair_id: str
    paper_id: str
    title: str
    content: tuple[str, ...]
    dialogue_id: str
    turn: int
    query: str
    reply: str
    history: tuple[str, ...]
    history_ids: tuple[str, ...]
    facts: tuple[str, ...]
    fact_indexes: tuple[int, ...]
    history_fact_indexes: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class DroppedFact:
    """A fact (piece) not mapped to a content sentence: in the title, nowhere, or blank."""

    split: str
    pair_id: str
    fact: str
    reason: str  # "title" | "not_found" | "empty"
    field: str = "facts"  # "facts" | "history_facts" (an earlier turn's facts)


@dataclass
class ArgSciChatFold:
    """The train/val/test message pairs of one official fold."""

    fold: int
    train: list[MessagePair]
    val: list[MessagePair]
    test: list[MessagePair]
    dropped_facts: list[DroppedFact] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    #: Content anomalies: {kind, split, id (paper id, or pair id for pair kinds), paper_id,
    #: title, file, message}.
    anomalies: list[dict[str, Any]] = field(default_factory=list)

    def __getitem__(self, split: str) -> list[MessagePair]:
        if split not in ARGSCICHAT_SPLITS:
            raise KeyError(f"unknown split {split!r}; known: {ARGSCICHAT_SPLITS}")
        return getattr(self, split)

    def fact_report(self) -> dict[str, int]:
        """How many gold facts were mapped to sentences and how many dropped, by reason
        (``history_dropped_*``: the same for the earlier turns' facts, ``history_facts``)."""
        pairs = self.train + self.val + self.test
        report = {"pairs": len(pairs), "facts": sum(len(p.facts) for p in pairs),
                  "pairs_without_facts": sum(not p.facts for p in pairs),
                  "pairs_without_fact_sentences": sum(not p.fact_indexes for p in pairs)}
        for prefix, fld in (("", "facts"), ("history_", "history_facts")):
            for reason in ("title", "not_found", "empty"):
                report[f"{prefix}dropped_{reason}"] = sum(
                    d.reason == reason and d.field == fld for d in self.dropped_facts)
        return report

    def anomaly_report(self) -> pd.DataFrame:
        """Content anomalies per split and kind (:data:`ARGSCICHAT_REPORT_COLUMNS`; zeros kept)."""
        by_split = {s: [a for a in self.anomalies if a["split"] == s] for s in ARGSCICHAT_SPLITS}
        return anomaly_report(by_split, ARGSCICHAT_ANOMALY_KINDS, ARGSCICHAT_REPORT_COLUMNS,
                              fold=self.fold)


