"""SAF text2text formats, output parsing and the prediction table every system returns.

The SAF paper's models (Filighera et al., ACL 2022; hub cards
``Short-Answer-Feedback/mbart-finetuned-saf-*``) read ``Antwort: <answer> Lösung:
<reference> Frage: <question>`` and write ``<label|score> Feedback: <text>``."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from saf_utils.saf.data import SAF_LABELS
from saf_utils.saf.spec import SAF_PUBLISHED

# --------------------------------------------------------------------------- constants

#: Prompt words per language. German is the anchor (hub cards); English follows the same
#: pattern (``Answer: … Reference: … Question: …``).
PROMPT_WORDS: dict[str, dict[str, str]] = {
    "de": {"answer": "Antwort", "reference": "Lösung", "question": "Frage",
           "feedback": "Feedback"},
    "en": {"answer": "Answer", "reference": "Reference", "question": "Question",
           "feedback": "Feedback"},
}
MODES = ("verification", "score")
#: Score implied by a label when a system predicts labels only (micro-job scores are
#: multiples of 0.25; "Partially correct" is the middle).
LABEL_SCORE: dict[str, float] = {"Correct": 1.0, "Partially correct": 0.5, "Incorrect": 0.0}

EVAL_SPLITS = ("validation", "test_unseen_answers", "test_unseen_questions")

PREDICTION_COLUMNS = (
    "id", "split", "question", "provided_answer", "reference_answer", "gold_label",
    "gold_score", "gold_feedback", "system", "seed", "raw_output", "pred_label",
    "pred_score", "pred_feedback", "parseable", "parse_problem", "backoff",
)


def published_table() -> pd.DataFrame:
    """:data:`saf_utils.saf.spec.SAF_PUBLISHED` as a frame, one column per metric (percent)."""
    return pd.DataFrame([{"model": p.system, "source": p.url, "dataset": p.dataset,
                          "split": p.split, **dict(p.values)} for p in SAF_PUBLISHED])


# --------------------------------------------------------------------------- formats


def prompt_words(language: str = "de", overrides: Mapping[str, str] | None = None
                 ) -> dict[str, str]:
    """The four prompt words for ``language`` (:data:`PROMPT_WORDS`) or ``overrides``."""
    base = {**PROMPT_WORDS.get(language, {}), **(overrides or {})}
    missing = [k for k in ("answer", "reference", "question", "feedback") if not base.get(k)]
    if missing:
        raise ValueError(
            f"prompt words for language {language!r} lack {missing}; known languages "
            f"{sorted(PROMPT_WORDS)}, or pass all four words as overrides"
        )
    return base


def _clean(text: Any) -> str:
    return " ".join(str(text).split())


def make_source(answer: str, reference: str, question: str | None = None,
                words: Mapping[str, str] | None = None) -> str:
    """Model input ``Antwort: … Lösung: … [Frage: …]`` (answer first, as on the hub cards)."""
    w = words or PROMPT_WORDS["de"]
    text = f"{w['answer']}: {_clean(answer)} {w['reference']}: {_clean(reference)}"
    if question is not None:
        text += f" {w['question']}: {_clean(question)}"
    return text


def format_score(score: float) -> str:
    """Score as target text: at most two decimals, no trailing zeros (``0.5``, ``1``)."""
    s = f"{float(score):.2f}".rstrip("0").rstrip(".")
    return s or "0"


def make_target(feedback: str, label: str | None = None, score: float | None = None,
                mode: str = "verification", words: Mapping[str, str] | None = None) -> str:
    """Model target ``<label> Feedback: <text>`` (or ``<score> Feedback: <text>``)."""
    w = words or PROMPT_WORDS["de"]
    if mode == "verification":
        if label not in SAF_LABELS:
            raise ValueError(f"label {label!r} not one of {list(SAF_LABELS)}")
        head = label
    elif mode == "score":
        if score is None or not 0.0 <= float(score) <= 1.0:
            raise ValueError(f"score {score!r} must lie in [0, 1] in score mode")
        head = format_score(score)
    else:
        raise ValueError(f"mode {mode!r} not one of {list(MODES)}")
    return f"{head} {w['feedback']}: {_clean(feedback)}"


def format_examples(df: pd.DataFrame, mode: str = "verification", include_question: bool = True,
                    words: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
    """Sources and targets for every row of a SAF frame."""
    sources = [
        make_source(a, r, q if include_question else None, words)
        for a, r, q in zip(df.provided_answer, df.reference_answer, df.question, strict=True)
    ]
    targets = [
        make_target(f, lab, s, mode, words)
        for f, lab, s in zip(df.answer_feedback, df.verification_feedback, df.score, strict=True)
    ]
    return sources, targets


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class ParsedOutput:
    """One generation, parsed. ``label``/``score`` are None when they cannot be recovered."""

    raw: str
    label: str | None
    score: float | None
    feedback: str
    parseable: bool
    problem: str = ""


_SPECIAL = re.compile(r"</?s>|<pad>|<unk>|\[(?:CLS|SEP|PAD)\]|<extra_id_\d+>")
#: A generated score: a plain ASCII decimal with one optional '.' or ',' separator; anything
#: else (``1e-1``, ``0,25,5``, ``٠٫٥``, ``50%``) is unparseable, never another number.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:[.,][0-9]*)?|[.,][0-9]+)", flags=re.ASCII)
_SCORE_TOKEN = re.compile(r"[^\s:]+")


def _norm_label_text(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def score_to_label(score: float) -> str:
    """Label implied by a score: 1 → Correct, 0 → Incorrect, anything between → partial."""
    if score >= 1.0 - 1e-9:
        return "Correct"
    if score <= 1e-9:
        return "Incorrect"
    return "Partially correct"


def _match_label(head: str, labels: Sequence[str]) -> tuple[str | None, int]:
    """Longest label that ``head`` starts with (case/space-insensitive, ending at a word
    boundary) and its char length."""
    norm = _norm_label_text(head)
    for lab in sorted(labels, key=len, reverse=True):
        key = _norm_label_text(lab)
        if norm == key or norm.startswith(key + " "):
            # Map back to a char position in ``head``: consume as many words as the label has.
            n_words = len(key.split())
            m = re.match(r"\W*" + r"\W+".join([r"\w+"] * n_words), head)
            return lab, (m.end() if m else len(head))
    return None, 0


def _parse_label(head: str, clean: str, marked: bool, labels: Sequence[str],
                 problems: list[str]) -> tuple[str | None, float | None, str | None]:
    """Label, its score and the feedback (None: the marker's) read from ``head``, the text
    before the feedback marker (the whole output when ``marked`` is False)."""
    label, end = _match_label(head, labels)
    feedback = None
    if label is None:
        problems.append("no label")
        if not marked:
            feedback = clean
    elif not marked:
        feedback = head[end:].strip(" :.-")
    elif head[end:].strip(" :.-"):
        problems.append("extra text before marker")
    return label, (LABEL_SCORE.get(label) if label is not None else None), feedback


def _parse_score(head: str, clean: str, marked: bool, problems: list[str]
                 ) -> tuple[str | None, float | None, str | None]:
    """Label, score and feedback (None: the marker's) when the head is a score: its first
    token less a trailing '.' or ',' ("0.5. Feedback") must be a plain decimal (_NUMBER)."""
    tm = _SCORE_TOKEN.match(head)
    token = tm.group(0).rstrip(".,") if tm else ""
    number = token if token and _NUMBER.fullmatch(token) else None
    if number is None:
        digits = tm is not None and any(ch.isnumeric() for ch in tm.group(0))
        problems.append(f"not a plain decimal score ({tm.group(0)!r})" if digits
                        else "no score")
        return None, None, (None if marked else clean)
    value = float(number.replace(",", "."))
    feedback = None if marked else head[tm.end():].strip(" :.-")
    if 0.0 <= value <= 1.0:
        return score_to_label(value), value, feedback
    problems.append(f"score {value} outside [0, 1]")
    return None, None, feedback


def parse_output(text: str | None, mode: str = "verification",
                 words: Mapping[str, str] | None = None,
                 labels: Sequence[str] = SAF_LABELS) -> ParsedOutput:
    """Parse ``<label|score> Feedback: <text>``; never raises on model output.

    Tolerates special tokens, any case, extra spaces and a missing ``Feedback:`` marker.
    No label (or no score in [0, 1], see :data:`_NUMBER`) is unparseable: label and score
    None, ``problem`` says why."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} not one of {list(MODES)}")
    raw = "" if text is None else str(text)
    clean = " ".join(_SPECIAL.sub(" ", raw).split())
    marker = (words or PROMPT_WORDS["de"])["feedback"]
    m = re.search(rf"\b{re.escape(marker)}\s*:", clean, flags=re.IGNORECASE)
    problems: list[str] = []
    if m:
        head, feedback = clean[: m.start()].strip(), clean[m.end():].strip()
    else:
        head, feedback = clean, ""
        problems.append("no feedback marker")
    label, score, guess = (_parse_label(head, clean, bool(m), labels, problems)
                           if mode == "verification"
                           else _parse_score(head, clean, bool(m), problems))
    if guess is not None:
        feedback = guess
    if not clean:
        problems = ["empty output"]
    return ParsedOutput(raw, label, score, feedback,
                        parseable=label is not None, problem="; ".join(problems))


# --------------------------------------------------------------------------- tables


def saf_frame(ds: Any, split: str, max_rows: int | None = None, seed: int = 0) -> pd.DataFrame:
    """A split as a frame with ``split`` column; ``max_rows`` takes a fixed random sample."""
    df = ds.to_pandas() if hasattr(ds, "to_pandas") else pd.DataFrame(ds)
    if max_rows and len(df) > max_rows:
        df = df.sample(n=max_rows, random_state=seed).sort_index()
    return df.reset_index(drop=True).assign(split=split)


def prediction_table(gold: pd.DataFrame, system: str, *, labels: Sequence[str | None],
                     scores: Sequence[float | None], feedback: Sequence[str],
                     raw: Sequence[str] | None = None, seed: int | None = None,
                     parseable: Sequence[bool] | None = None,
                     problems: Sequence[str] | None = None,
                     backoff: Sequence[bool] | None = None) -> pd.DataFrame:
    """One row per gold example with the system's predictions (:data:`PREDICTION_COLUMNS`)."""
    n = len(gold)
    for name, seq in (("labels", labels), ("scores", scores), ("feedback", feedback)):
        if len(seq) != n:
            raise ValueError(f"{system}: {len(seq)} {name} for {n} gold rows")
    out = pd.DataFrame({
        "id": gold["id"].to_numpy(),
        "split": gold["split"].to_numpy() if "split" in gold else None,
        "question": gold["question"].to_numpy(),
        "provided_answer": gold["provided_answer"].to_numpy(),
        "reference_answer": gold["reference_answer"].to_numpy(),
        "gold_label": gold["verification_feedback"].to_numpy(),
        "gold_score": gold["score"].astype(float).to_numpy(),
        "gold_feedback": gold["answer_feedback"].to_numpy(),
        "system": system,
        "seed": seed,
        "raw_output": list(raw) if raw is not None else [None] * n,
        "pred_label": list(labels),
        "pred_score": [None if s is None or (isinstance(s, float) and math.isnan(s))
                       else float(s) for s in scores],
        "pred_feedback": [str(f) for f in feedback],
        "parseable": list(parseable) if parseable is not None
        else [lab is not None for lab in labels],
        "parse_problem": list(problems) if problems is not None else [""] * n,
        "backoff": list(backoff) if backoff is not None else [False] * n,
    })
    out["pred_label"] = pd.Series(list(labels), dtype=object)  # None stays None
    if "error_class" in gold:
        out["error_class"] = gold["error_class"].to_numpy()
    return out


def parsed_prediction_table(gold: pd.DataFrame, system: str, outputs: Sequence[str],
                            mode: str = "verification", words: Mapping[str, str] | None = None,
                            seed: int | None = None) -> pd.DataFrame:
    """Prediction table of raw generations: every output parsed, unparseable ones kept."""
    parsed = [parse_output(o, mode, words) for o in outputs]
    return prediction_table(
        gold, system, labels=[p.label for p in parsed], scores=[p.score for p in parsed],
        feedback=[p.feedback for p in parsed], raw=list(outputs), seed=seed,
        parseable=[p.parseable for p in parsed], problems=[p.problem for p in parsed])
