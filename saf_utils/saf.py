"""Short answer feedback (SAF): text2text formats, output parsing, baselines, evaluation.

The fine-tuned models of the SAF paper (Filighera et al., ACL 2022; hub cards
``Short-Answer-Feedback/mbart-finetuned-saf-*``) read ``Antwort: <answer> Lösung:
<reference> Frage: <question>`` and write ``<label> Feedback: <text>`` (score models:
``<score> Feedback: <text>``). :func:`make_source` / :func:`make_target` build these strings
for any prompt language (:data:`PROMPT_WORDS`), :func:`parse_output` turns any generation
back into (label, score, feedback) without ever raising.

Beside the seq2seq model, this module holds the non-neural systems the notebook compares
(:func:`majority_baseline`, :func:`nearest_neighbour_baseline`, :class:`FeatureClassifier`),
the evaluation of a prediction table (:func:`evaluate_predictions`) and the grouping
helpers of the error analysis (:func:`per_question_metrics`, :func:`error_class_breakdown`,
...). All systems return the same prediction table (:data:`PREDICTION_COLUMNS`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.data import SAF_LABELS

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

#: Published numbers (model cards on the Hugging Face hub), cited, never measured here.
#: Scale as on the cards: every metric in percent (0-100).
PUBLISHED_SAF_RESULTS: tuple[dict[str, Any], ...] = tuple(
    {"model": model, "source": src, "dataset": ds, "split": split,
     **dict(zip(("sacrebleu", "rouge2", "meteor", "bertscore_f1", "accuracy",
                 "weighted_f1", "macro_f1"), vals, strict=True))}
    for model, src, ds, split, vals in (
        ("mbart-finetuned-saf-legal-domain",
         "https://huggingface.co/Short-Answer-Feedback/mbart-finetuned-saf-legal-domain",
         "saf_legal_domain_german", "test_unseen_answers",
         (43.6, 45.3, 57.4, 55.0, 81.0, 79.4, 71.3)),
        ("mbart-finetuned-saf-legal-domain",
         "https://huggingface.co/Short-Answer-Feedback/mbart-finetuned-saf-legal-domain",
         "saf_legal_domain_german", "test_unseen_questions",
         (3.0, 4.2, 19.9, 16.1, 60.0, 54.4, 53.2)),
        ("mbart-finetuned-saf-micro-job",
         "https://huggingface.co/Short-Answer-Feedback/mbart-finetuned-saf-micro-job",
         "saf_micro_job_german", "test_unseen_answers",
         (39.5, 29.8, 63.3, 63.1, 80.1, 80.3, 80.7)),
        ("mbart-finetuned-saf-micro-job",
         "https://huggingface.co/Short-Answer-Feedback/mbart-finetuned-saf-micro-job",
         "saf_micro_job_german", "test_unseen_questions",
         (0.3, 0.5, 33.8, 31.3, 48.7, 46.5, 40.6)),
    )
)

#: Quality targets of the cpu profile on saf_micro_job_german (best system per split).
SAF_TARGETS: dict[str, dict[str, float]] = {
    "test_unseen_answers": {"accuracy": 0.82, "macro_f1": 0.81, "sacrebleu": 41.0},
    "test_unseen_questions": {"accuracy": 0.60, "macro_f1": 0.50},
}

EVAL_SPLITS = ("validation", "test_unseen_answers", "test_unseen_questions")

PREDICTION_COLUMNS = (
    "id", "split", "question", "provided_answer", "reference_answer", "gold_label",
    "gold_score", "gold_feedback", "system", "seed", "raw_output", "pred_label",
    "pred_score", "pred_feedback", "parseable", "parse_problem", "backoff",
)


def published_table() -> pd.DataFrame:
    """:data:`PUBLISHED_SAF_RESULTS` as a frame (percent scale, as on the cards)."""
    return pd.DataFrame(list(PUBLISHED_SAF_RESULTS))


# --------------------------------------------------------------------------- formats


def prompt_words(language: str = "de", overrides: Mapping[str, str] | None = None
                 ) -> dict[str, str]:
    """The four prompt words for ``language`` (see :data:`PROMPT_WORDS`), optionally overridden.

    Any language works through ``overrides`` holding all four keys.
    """
    base = dict(PROMPT_WORDS.get(language, {}))
    base.update(overrides or {})
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
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:[.,]\d*)?|[.,]\d+)")


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
    """Longest label that ``head`` starts with (case/space-insensitive) and its char length.

    Longest first, so "Partially correct" never reads as "Correct" and "Incorrect" never as
    "Correct"; a label must end at a word boundary ("Correctness" is no label).
    """
    norm = _norm_label_text(head)
    for lab in sorted(labels, key=len, reverse=True):
        key = _norm_label_text(lab)
        if norm == key or norm.startswith(key + " "):
            # Map back to a char position in ``head``: consume as many words as the label has.
            n_words = len(key.split())
            m = re.match(r"\W*" + r"\W+".join([r"\w+"] * n_words), head)
            return lab, (m.end() if m else len(head))
    return None, 0


def parse_output(text: str | None, mode: str = "verification",
                 words: Mapping[str, str] | None = None,
                 labels: Sequence[str] = SAF_LABELS) -> ParsedOutput:
    """Parse ``<label|score> Feedback: <text>``; never raises on model output.

    Tolerates special tokens, any case ("partially correct"), extra spaces, a missing
    ``Feedback:`` marker (the label/score is then read from the start and the rest is the
    feedback). Anything that yields no label (or no score in [0, 1]) is unparseable: label
    and score None, feedback the best guess, ``problem`` says why.
    """
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} not one of {list(MODES)}")
    raw = "" if text is None else str(text)
    clean = " ".join(_SPECIAL.sub(" ", raw).split())
    marker = (words or PROMPT_WORDS["de"])["feedback"]
    m = re.search(rf"\b{re.escape(marker)}\s*:", clean, flags=re.IGNORECASE)
    problems = []
    if m:
        head, feedback = clean[: m.start()].strip(), clean[m.end():].strip()
    else:
        head, feedback = clean, ""
        problems.append("no feedback marker")
    label: str | None = None
    score: float | None = None
    if mode == "verification":
        label, end = _match_label(head, labels)
        if label is None:
            problems.append("no label")
            if not m:
                feedback = clean
        elif not m:
            feedback = head[end:].strip(" :.-")
        elif head[end:].strip(" :.-"):
            problems.append("extra text before marker")
        if label is not None:
            score = LABEL_SCORE.get(label)
    else:
        nm = _NUMBER.match(head)
        if nm is None:
            problems.append("no score")
            if not m:
                feedback = clean
        else:
            value = float(nm.group(0).replace(",", "."))
            if not m:
                feedback = head[nm.end():].strip(" :.-")
            if 0.0 <= value <= 1.0:
                score, label = value, score_to_label(value)
            else:
                problems.append(f"score {value} outside [0, 1]")
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
    """One row per gold example with the system's predictions (:data:`PREDICTION_COLUMNS`).

    ``error_class`` is carried over when the gold frame has it.
    """
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


def save_predictions(preds: pd.DataFrame, path: Any) -> None:
    """Write a prediction table as JSON lines (one row per example, UTF-8)."""
    preds.to_json(path, orient="records", lines=True, force_ascii=False)


def load_predictions(path: Any) -> pd.DataFrame:
    """Read a prediction table written by :func:`save_predictions`."""
    return pd.read_json(path, lines=True, dtype={"id": str, "pred_label": object})


# --------------------------------------------------------------------------- helpers


def _mode(values: Sequence[Any]) -> Any:
    """Most frequent value; ties go to the first seen (deterministic)."""
    return Counter(values).most_common(1)[0][0]


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


Encoder = Callable[[Sequence[str]], np.ndarray]


class CachedEncoder:
    """``texts -> L2-normalised embeddings`` that embeds each distinct text once per process.

    The baselines and the classifier embed the same answers and references many times;
    this keeps the notebook's encoder cost at one pass over the distinct texts.
    """

    def __init__(self, model: str = "local:all-MiniLM-L6-v2",
                 encode_fn: Callable[[list[str]], np.ndarray] | None = None):
        self.model = model
        self._encode_fn = encode_fn
        self.cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = [str(t) for t in texts]
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            if self._encode_fn is None:
                from saf_utils.encoders import encode

                vecs = encode(missing, model=self.model)
            else:
                vecs = self._encode_fn(missing)
            self.cache.update(zip(missing, np.asarray(vecs, dtype=np.float32), strict=True))
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])


_WORD = re.compile(r"\w+", re.UNICODE)
_POINTS = re.compile(r"\(\s*(?:je\s+)?[\d.,\s\-–]+\s*P\.?\s*\)", re.IGNORECASE)


def strip_points(text: str) -> str:
    """Remove grading annotations like ``(0.25 P)`` / ``(je 0.25 P)`` from a reference answer."""
    return " ".join(_POINTS.sub("", text).split())


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _content(text: str) -> set[str]:
    return {t for t in _tokens(text) if len(t) > 3 and not t.isdigit()}


def _sentences(text: str) -> list[str]:
    parts = [p.strip() for p in re.split(r"(?<=[.!?;])\s+", strip_points(text)) if p.strip()]
    return parts or [text]


# --------------------------------------------------------------------------- baselines


def majority_baseline(train: pd.DataFrame, test: pd.DataFrame,
                      system: str = "majority") -> pd.DataFrame:
    """Per question: most frequent label, score and feedback of its training answers.

    Questions without training answers (unseen questions) back off to the global majority
    label/score/feedback; those rows have ``backoff=True``.
    """
    per_q = train.groupby("question").agg(
        label=("verification_feedback", _mode), score=("score", _mode),
        feedback=("answer_feedback", _mode))
    glob = (_mode(train.verification_feedback.tolist()), _mode(train.score.tolist()),
            _mode(train.answer_feedback.tolist()))
    labels, scores, fbs, back = [], [], [], []
    for q in test.question:
        if q in per_q.index:
            row = per_q.loc[q]
            labels.append(row.label)
            scores.append(float(row.score))
            fbs.append(row.feedback)
            back.append(False)
        else:
            labels.append(glob[0])
            scores.append(float(glob[1]))
            fbs.append(glob[2])
            back.append(True)
    return prediction_table(test, system, labels=labels, scores=scores, feedback=fbs,
                            backoff=back)


def _macro_f1(y: np.ndarray, pred: np.ndarray, labels: Sequence[str] = SAF_LABELS) -> float:
    """Macro F1 over ``labels`` (fast numpy version for threshold grids)."""
    f1s = []
    for lab in labels:
        tp = float(np.sum((pred == lab) & (y == lab)))
        denom = float(np.sum(pred == lab) + np.sum(y == lab))
        f1s.append(2 * tp / denom if denom else 0.0)
    return float(np.mean(f1s))


@dataclass
class ReferenceThresholds:
    """Label from cosine(answer, reference) with two cut points learned on train.

    The zero-training-answer fallback for unseen questions: ``cos >= hi`` → Correct,
    ``cos < lo`` → Incorrect, else partial; cut points maximise train macro-F1.
    """

    lo: float = 0.0
    hi: float = 1.0

    def fit(self, cos: np.ndarray, labels: Sequence[str]) -> ReferenceThresholds:
        cos = np.asarray(cos, dtype=float)
        y = np.asarray(list(labels))
        grid = np.unique(np.quantile(cos, np.linspace(0.02, 0.98, 49)))
        best = (-1.0, self.lo, self.hi)
        for i, lo in enumerate(grid):
            for hi in grid[i:]:
                f1 = _macro_f1(y, np.asarray(self._apply(cos, lo, hi)))
                if f1 > best[0]:
                    best = (f1, lo, hi)
        self.lo, self.hi = float(best[1]), float(best[2])
        return self

    @staticmethod
    def _apply(cos: np.ndarray, lo: float, hi: float) -> list[str]:
        return ["Correct" if c >= hi else "Incorrect" if c < lo else "Partially correct"
                for c in cos]

    def predict(self, cos: np.ndarray) -> list[str]:
        return self._apply(cos, self.lo, self.hi)


class FeedbackBank:
    """Training feedback, looked up by (question, label) and by answer similarity.

    For unseen questions: Correct gets the most frequent training feedback of Correct
    answers (often a fixed phrase), other labels the most frequent feedback of that label
    for the training question closest to the new one (``strategy="nearest_question"``) or
    the reference answer without point annotations (``strategy="reference"``).
    """

    def __init__(self, train: pd.DataFrame, encoder: Encoder | None = None):
        self.train = train.reset_index(drop=True)
        self.encoder = encoder
        self.by_q_label = train.groupby(["question", "verification_feedback"]).answer_feedback \
            .agg(_mode).to_dict()
        self.by_label = train.groupby("verification_feedback").answer_feedback.agg(_mode) \
            .to_dict()
        self.questions = sorted(set(train.question))
        self._q_emb: np.ndarray | None = None

    def most_frequent(self, question: str, label: str) -> str | None:
        return self.by_q_label.get((question, label))

    def nearest_question(self, question: str) -> str:
        if self.encoder is None:
            return self.questions[0]
        if self._q_emb is None:
            self._q_emb = _unit(self.encoder(self.questions))
        v = _unit(self.encoder([question]))[0]
        return self.questions[int(np.argmax(self._q_emb @ v))]

    def unseen(self, question: str, reference: str, label: str,
               strategy: str = "nearest_question") -> str:
        if label == "Correct" or strategy == "global":
            return self.by_label.get(label, "")
        if strategy == "reference":
            return strip_points(reference)
        if strategy == "nearest_question":
            near = self.nearest_question(question)
            return self.by_q_label.get((near, label)) or self.by_label.get(label, "")
        raise ValueError(f"unknown unseen-question feedback strategy {strategy!r}")


def nearest_neighbour_baseline(train: pd.DataFrame, test: pd.DataFrame, encoder: Encoder,
                               system: str = "nearest_neighbour",
                               unseen_feedback: str = "nearest_question") -> pd.DataFrame:
    """Label, score and feedback of the most similar training answer to the same question.

    Unseen questions have no training answers: their label comes from
    cosine(answer, reference) with :class:`ReferenceThresholds` fitted on train, their
    feedback from :class:`FeedbackBank` (``backoff=True`` on those rows).
    """
    tr = train.reset_index(drop=True)
    a_tr = _unit(encoder(tr.provided_answer.tolist()))
    a_te = _unit(encoder(test.provided_answer.tolist()))
    thr = ReferenceThresholds().fit(_ref_cos(tr, a_tr, encoder), tr.verification_feedback)
    ref_cos_te = _ref_cos(test, a_te, encoder)
    bank = FeedbackBank(tr, encoder)
    idx_by_q = {q: np.flatnonzero(tr.question.to_numpy() == q) for q in set(tr.question)}
    labels, scores, fbs, back = [], [], [], []
    for i, (q, ref) in enumerate(zip(test.question, test.reference_answer, strict=True)):
        cand = idx_by_q.get(q)
        if cand is not None and len(cand):
            j = cand[int(np.argmax(a_tr[cand] @ a_te[i]))]
            labels.append(tr.verification_feedback[j])
            scores.append(float(tr.score[j]))
            fbs.append(tr.answer_feedback[j])
            back.append(False)
        else:
            lab = thr.predict(ref_cos_te[i:i + 1])[0]
            labels.append(lab)
            scores.append(LABEL_SCORE[lab])
            fbs.append(bank.unseen(q, ref, lab, unseen_feedback))
            back.append(True)
    return prediction_table(test, system, labels=labels, scores=scores, feedback=fbs,
                            backoff=back)


def _ref_cos(df: pd.DataFrame, a: np.ndarray, encoder: Encoder) -> np.ndarray:
    r = _unit(encoder([strip_points(t) for t in df.reference_answer]))
    return np.einsum("ij,ij->i", a, r)


# --------------------------------------------------------------------------- classifier

GENERIC_FEATURES = (
    "cos_ref", "cos_ref_sent_max", "cos_ref_sent_mean", "cos_question", "ref_recall",
    "ref_precision", "ref_jaccard", "log_len", "len_ratio", "cos_ref_rank",
)


def generic_features(df: pd.DataFrame, encoder: Encoder) -> pd.DataFrame:
    """Question-agnostic answer–reference features (usable for unseen questions).

    Embedding cosine answer↔reference (whole, and max/mean over reference sentences),
    answer↔question, lexical recall/precision/Jaccard of reference content words, answer
    length and length ratio, and the cosine's rank among the *reference's own sentences*
    (a per-question normaliser that needs no other answers).
    """
    a = _unit(encoder(df.provided_answer.tolist()))
    refs = [strip_points(r) for r in df.reference_answer]
    r = _unit(encoder(refs))
    qv = _unit(encoder(df.question.tolist()))
    sent_lists = [_sentences(x) for x in df.reference_answer]
    flat = [s for ss in sent_lists for s in ss]
    s_emb = _unit(encoder(flat)) if flat else np.zeros((0, a.shape[1]))
    out: dict[str, list[float]] = {k: [] for k in GENERIC_FEATURES}
    pos = 0
    for i, ss in enumerate(sent_lists):
        sims = s_emb[pos:pos + len(ss)] @ a[i]
        self_sims = s_emb[pos:pos + len(ss)] @ r[i]
        pos += len(ss)
        cos_ref = float(a[i] @ r[i])
        ans_c, ref_c = _content(df.provided_answer.iloc[i]), _content(refs[i])
        inter = len(ans_c & ref_c)
        n_ans = max(len(_tokens(df.provided_answer.iloc[i])), 1)
        out["cos_ref"].append(cos_ref)
        out["cos_ref_sent_max"].append(float(sims.max()))
        out["cos_ref_sent_mean"].append(float(sims.mean()))
        out["cos_question"].append(float(a[i] @ qv[i]))
        out["ref_recall"].append(inter / max(len(ref_c), 1))
        out["ref_precision"].append(inter / max(len(ans_c), 1))
        out["ref_jaccard"].append(inter / max(len(ans_c | ref_c), 1))
        out["log_len"].append(math.log(n_ans))
        out["len_ratio"].append(n_ans / max(len(_tokens(refs[i])), 1))
        out["cos_ref_rank"].append(cos_ref - float(self_sims.mean()))
    return pd.DataFrame(out, index=df.index)


def knn_features(train: pd.DataFrame, a_train: np.ndarray, df: pd.DataFrame, a_df: np.ndarray,
                 k: int = 5, leave_one_out: bool = False) -> pd.DataFrame:
    """Similarity to training answers of the same question, per label (seen questions).

    Per label: max cosine to that label's training answers and the similarity-weighted
    share of the label among the k nearest; plus the neighbours' mean score. With
    ``leave_one_out`` (features of the training rows themselves) each row's own entry
    is excluded, so the classifier never sees its own label.
    """
    q_tr = train.question.to_numpy()
    y_tr = train.verification_feedback.to_numpy()
    s_tr = train.score.to_numpy(dtype=float)
    cols = [f"max_cos_{lab}" for lab in SAF_LABELS] + [f"knn_{lab}" for lab in SAF_LABELS]
    cols += ["knn_score", "nn_cos"]
    rows = []
    for i, q in enumerate(df.question.to_numpy()):
        cand = np.flatnonzero(q_tr == q)
        if leave_one_out:
            cand = cand[cand != i]
        if len(cand) == 0:
            rows.append([np.nan] * len(cols))
            continue
        sims = a_train[cand] @ a_df[i]
        feats = [float(sims[y_tr[cand] == lab].max()) if (y_tr[cand] == lab).any() else -1.0
                 for lab in SAF_LABELS]
        top = np.argsort(-sims, kind="stable")[:k]
        w = np.clip(sims[top], 1e-3, None)
        feats += [float(w[y_tr[cand][top] == lab].sum() / w.sum()) for lab in SAF_LABELS]
        feats += [float((w * s_tr[cand][top]).sum() / w.sum()), float(sims[top[0]])]
        rows.append(feats)
    return pd.DataFrame(rows, columns=cols, index=df.index)


def per_question_zscore(x: np.ndarray, questions: Sequence[str]) -> np.ndarray:
    """Standardise each feature within each question's answers (a per-question curve).

    Transductive: uses the other (unlabelled) answers to the same question, as a grader
    who sees a whole batch of answers would.
    """
    x = np.asarray(x, dtype=float).copy()
    q = np.asarray(questions)
    for value in dict.fromkeys(q):
        m = q == value
        x[m] = (x[m] - x[m].mean(axis=0)) / (x[m].std(axis=0) + 1e-6)
    return x


@dataclass
class FeatureClassifier:
    """"feature classifier + retrieved feedback" (system name ``feature_clf``).

    Two scikit-learn classifiers predict the label: a *seen-question* model over generic
    answer–reference features + kNN label votes among training answers of the same
    question + a question one-hot, and a *generic* model over the question-agnostic
    features only, used for questions without training answers. The score is the mean
    training score of (question, predicted label) (label→score mapping for unseen
    questions). Feedback is retrieved, never generated: the most frequent training
    feedback of (question, predicted label) (``feedback="most_frequent"``) or the nearest
    training answer's feedback among those with the predicted label (``"nearest"``);
    unseen questions use :class:`FeedbackBank`.
    """

    encoder: Encoder
    model: str = "logreg"  # logreg | hgb
    C: float = 1.0
    generic_C: float = 1.0
    generic_class_weight: str | None = "balanced"
    generic_feature_names: Sequence[str] | None = None  # None: all GENERIC_FEATURES
    normalize_unseen: bool = False
    k: int = 5
    feedback: str = "most_frequent"
    unseen_feedback: str = "nearest_question"
    seed: int = 0
    system: str = "feature_clf"
    _fitted: dict[str, Any] = field(default_factory=dict, repr=False)

    def _make(self, C: float, class_weight: str | None = "balanced"):
        if class_weight is None or class_weight == "none" or (
                isinstance(class_weight, float) and math.isnan(class_weight)):
            class_weight = None
        from sklearn.ensemble import HistGradientBoostingClassifier
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        if self.model == "logreg":
            return make_pipeline(StandardScaler(), LogisticRegression(
                C=C, max_iter=2000, class_weight=class_weight, random_state=self.seed))
        if self.model == "hgb":
            return HistGradientBoostingClassifier(max_depth=3, learning_rate=0.05,
                                                  max_iter=200, class_weight=class_weight,
                                                  random_state=self.seed)
        raise ValueError(f"unknown classifier {self.model!r} (logreg | hgb)")

    def _seen_matrix(self, df: pd.DataFrame, a: np.ndarray, loo: bool) -> np.ndarray:
        f = self._generic_of(df)
        knn = knn_features(self._train, self._a_train, df, a, self.k, leave_one_out=loo)
        qs = np.array([[float(q == u) for u in self._questions] for q in df.question])
        return np.hstack([f.to_numpy(), knn.fillna(0).to_numpy(), qs])

    def _generic_of(self, df: pd.DataFrame) -> pd.DataFrame:
        return generic_features(df, self.encoder)

    def _generic_matrix(self, df: pd.DataFrame) -> np.ndarray:
        x = self._generic_of(df)[list(self.generic_feature_names or GENERIC_FEATURES)].to_numpy()
        return per_question_zscore(x, df.question.to_numpy()) if self.normalize_unseen else x

    def fit(self, train: pd.DataFrame) -> FeatureClassifier:
        tr = train.reset_index(drop=True)
        self._train = tr
        self._a_train = _unit(self.encoder(tr.provided_answer.tolist()))
        self._questions = sorted(set(tr.question))
        y = tr.verification_feedback.to_numpy()
        self._seen = self._make(self.C).fit(self._seen_matrix(tr, self._a_train, True), y)
        self._generic = self._make(self.generic_C, self.generic_class_weight).fit(
            self._generic_matrix(tr), y)
        self._score = tr.groupby(["question", "verification_feedback"]).score.mean().to_dict()
        self._bank = FeedbackBank(tr, self.encoder)
        return self

    def predict_labels(self, test: pd.DataFrame) -> tuple[list[str], np.ndarray]:
        te = test.reset_index(drop=True)
        a = _unit(self.encoder(te.provided_answer.tolist()))
        seen = te.question.isin(set(self._questions)).to_numpy()
        labels = np.empty(len(te), dtype=object)
        if seen.any():
            sub = te[seen]
            labels[seen] = self._seen.predict(self._seen_matrix(sub, a[seen], False))
        if (~seen).any():
            labels[~seen] = self._generic.predict(self._generic_matrix(te[~seen]))
        return list(labels), seen

    def predict(self, test: pd.DataFrame) -> pd.DataFrame:
        te = test.reset_index(drop=True)
        labels, seen = self.predict_labels(te)
        a = _unit(self.encoder(te.provided_answer.tolist()))
        tr_q = self._train.question.to_numpy()
        tr_y = self._train.verification_feedback.to_numpy()
        scores, fbs = [], []
        for i, (q, ref, lab) in enumerate(zip(te.question, te.reference_answer, labels,
                                              strict=True)):
            if seen[i]:
                scores.append(float(self._score.get((q, lab), LABEL_SCORE[lab])))
                fb = None
                if self.feedback == "nearest":
                    cand = np.flatnonzero((tr_q == q) & (tr_y == lab))
                    if len(cand):
                        j = cand[int(np.argmax(self._a_train[cand] @ a[i]))]
                        fb = self._train.answer_feedback[j]
                elif self.feedback != "most_frequent":
                    raise ValueError(f"unknown feedback strategy {self.feedback!r}")
                fbs.append(fb or self._bank.most_frequent(q, lab)
                           or self._bank.by_label.get(lab, ""))
            else:
                scores.append(LABEL_SCORE[lab])
                fbs.append(self._bank.unseen(q, ref, lab, self.unseen_feedback))
        return prediction_table(te, self.system, labels=labels, scores=scores, feedback=fbs,
                                seed=self.seed, backoff=list(~seen))


def grouped_cv_generic(train: pd.DataFrame, encoder: Encoder,
                       Cs: Sequence[float] = (0.1, 1.0),
                       class_weights: Sequence[str | None] = ("balanced", None),
                       normalize: Sequence[bool] = (False, True),
                       feature_sets: Mapping[str, Sequence[str] | None] | None = None
                       ) -> pd.DataFrame:
    """Leave-one-question-out accuracy/macro-F1 of the generic classifier on train.

    Validation holds only seen questions, so the unseen-question model is tuned by holding
    out each training question in turn: the honest proxy for "unseen question". Rows name
    the feature set (``feature_sets``: name → feature names, None = all).
    """
    from sklearn.metrics import accuracy_score, f1_score

    tr = train.reset_index(drop=True)
    feats = generic_features(tr, encoder)
    y = tr.verification_feedback.to_numpy()
    qs = tr.question.to_numpy()
    rows = []
    for set_name, names in (feature_sets or {"all": None}).items():
        unknown = sorted(set(names or ()) - set(GENERIC_FEATURES))
        if unknown:
            raise ValueError(f"feature set {set_name!r}: unknown feature(s) {unknown}; "
                             f"known: {list(GENERIC_FEATURES)}")
        raw = feats[list(names or GENERIC_FEATURES)].to_numpy()
        for norm in normalize:
            X = per_question_zscore(raw, qs) if norm else raw
            for cw in class_weights:
                for C in Cs:
                    clf = FeatureClassifier(encoder)
                    pred = np.empty(len(tr), dtype=object)
                    for q in dict.fromkeys(qs):
                        held = qs == q
                        pred[held] = clf._make(C, cw).fit(X[~held], y[~held]).predict(X[held])
                    rows.append({
                        "feature_set": set_name, "generic_feature_names": names,
                        "normalize_unseen": norm, "generic_class_weight": cw or "none",
                        "generic_C": C, "accuracy": accuracy_score(y, pred),
                        "macro_f1": f1_score(y, list(pred), average="macro",
                                             labels=list(SAF_LABELS), zero_division=0)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- evaluation


def _bertscore_pairs(pairs: Sequence[tuple[str, str]], **kw: Any) -> dict[tuple[str, str], float]:
    """BERTScore F1 of each distinct (hypothesis, reference) pair, in one call."""
    from saf_utils.embedding_metrics import bertscore

    unique = list(dict.fromkeys(pairs))
    res = bertscore([p[0] for p in unique], [p[1] for p in unique], **kw)
    return dict(zip(unique, res["f1_per_pair"], strict=True))


def _dedup_bertscore(hyps: Sequence[str], refs: Sequence[str], **kw: Any) -> float:
    """Mean BERTScore F1 over all pairs, each distinct (hyp, ref) pair scored once."""
    pairs = list(zip(hyps, refs, strict=True))
    f1 = _bertscore_pairs(pairs, **kw)
    return float(np.mean([f1[p] for p in pairs]))


def _texts(preds: pd.DataFrame) -> tuple[list[str], list[str]]:
    hyps = [str(h) if isinstance(h, str) else "" for h in preds.pred_feedback]
    return hyps, preds.gold_feedback.astype(str).tolist()


def _reference_idf(refs: Sequence[str], tok: Any) -> dict[int, float]:
    """moverscore_v2 IDF (log((N+1)/(df+1))) over the references; unseen ids log(N+1)."""
    from collections import defaultdict

    n = len(refs)
    df: Counter[int] = Counter()
    for r in refs:
        df.update(set(tok.convert_tokens_to_ids(tok.tokenize(r))))
    idf: defaultdict[int, float] = defaultdict(lambda: math.log(n + 1))
    idf.update({i: math.log((n + 1) / (c + 1)) for i, c in df.items()})
    for special in (tok.cls_token_id, tok.sep_token_id):
        if special is not None:
            idf[special] = 0.0
    return idf


def moverscore_mean(hyps: Sequence[str], refs: Sequence[str], model: Any) -> float:
    """Mean MoverScore v2 with IDF weights from the *gold* feedback for both sides.

    moverscore_v2 computes hypothesis IDF over the system's own outputs, so a system that
    always writes the same text gets IDF 0 everywhere and a perfect 1.0; an empty output
    also scores 1.0. Here one IDF table from the references serves both sides (unseen
    word pieces get the maximal weight log(N+1)) and an empty hypothesis scores 0.
    """
    return _moverscore_tables([(list(hyps), list(refs))], model)[0]


def _moverscore_tables(items: Sequence[tuple[list[str], list[str]]], model: Any) -> list[float]:
    """:func:`moverscore_mean` of several (hyps, refs) lists; one call per reference list."""
    import torch

    from saf_utils.embedding_metrics import load_encoder, moverscore

    device = "cuda" if torch.cuda.is_available() else "cpu"
    _, tok = load_encoder(model, device=device)
    out: list[float] = [0.0] * len(items)
    groups: dict[tuple[str, ...], list[int]] = {}
    for i, (_, refs) in enumerate(items):
        groups.setdefault(tuple(refs), []).append(i)
    for refs, members in groups.items():
        idf = _reference_idf(refs, tok)
        all_h = [h for i in members for h in items[i][0]]
        scores = moverscore(list(refs) * len(members), all_h, model=model, device=device,
                            idf_dict_ref=idf, idf_dict_hyp=idf)
        for k, i in enumerate(members):
            part = scores[k * len(refs):(k + 1) * len(refs)]
            out[i] = float(np.mean([0.0 if not h.strip() else sc
                                    for h, sc in zip(items[i][0], part, strict=True)]))
    return out


def evaluate_predictions(preds: pd.DataFrame, bertscore_kwargs: Mapping[str, Any] | None = None,
                         moverscore_model: Any = None, embedding_metrics: bool = True
                         ) -> dict[str, float]:
    """All SAF metrics of one prediction table (one system, seed and split).

    Label metrics count unparseable rows as wrong; ``mse`` is over rows with a score
    (``mse_max_penalty`` charges missing ones the worst error); feedback metrics compare
    parsed feedback (empty when unparseable) with gold. sacreBLEU/chrF are 0-100, the
    rest 0-1.
    """
    from saf_utils import metrics as M

    gold_l = preds.gold_label.tolist()
    pred_l = [p if isinstance(p, str) else None for p in preds.pred_label]
    out: dict[str, float] = {}
    lm = M.label_metrics(gold_l, pred_l)
    out.update({k: float(lm[k]) for k in ("accuracy", "macro_f1", "weighted_f1")})
    out["n_unparseable"] = float(lm["n_unparseable"])
    out["unparseable_rate"] = lm["n_unparseable"] / max(len(preds), 1)
    sm = M.score_mse(preds.gold_score.tolist(),
                     [None if s is None or pd.isna(s) else float(s) for s in preds.pred_score])
    if not math.isnan(sm["mse"]):
        out["mse"] = sm["mse"]
    out["mse_max_penalty"] = sm["mse_max_penalty"]
    hyps, refs = _texts(preds)
    out["sacrebleu"] = M.bleu(hyps, refs)
    out["chrf"] = M.chrf(hyps, refs)
    out["rouge2"] = M.rouge(hyps, refs)["rouge2"]
    out["meteor"] = M.meteor(hyps, refs)
    if embedding_metrics:
        out["bertscore_f1"] = _dedup_bertscore(hyps, refs, **dict(bertscore_kwargs or {}))
        if moverscore_model is not None:
            out["moverscore"] = moverscore_mean(hyps, refs, moverscore_model)
    return out


def evaluate_tables(tables: Sequence[pd.DataFrame],
                    bertscore_kwargs: Mapping[str, Any] | None = None,
                    moverscore_model: Any = None, embedding_metrics: bool = True
                    ) -> list[dict[str, float]]:
    """:func:`evaluate_predictions` of many tables, embedding metrics batched across them.

    BERTScore runs once over the distinct pairs of all tables and MoverScore once per
    reference list (split): same numbers, far fewer model calls.
    """
    results = [evaluate_predictions(t, embedding_metrics=False) for t in tables]
    if not embedding_metrics or not tables:
        return results
    texts = [_texts(t) for t in tables]
    f1 = _bertscore_pairs([p for h, r in texts for p in zip(h, r, strict=True)],
                          **dict(bertscore_kwargs or {}))
    for res, (h, r) in zip(results, texts, strict=True):
        res["bertscore_f1"] = float(np.mean([f1[p] for p in zip(h, r, strict=True)]))
    if moverscore_model is not None:
        for res, ms in zip(results, _moverscore_tables(texts, moverscore_model), strict=True):
            res["moverscore"] = ms
    return results


def summarize_seeds(metrics: pd.DataFrame) -> pd.DataFrame:
    """Mean ± std (ddof=1, 0 for one seed) over seeds per split/system/metric."""
    g = metrics.groupby(["split", "system", "metric"], sort=False)["value"]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out.rename(columns={"count": "n_seeds"})


def best_vs_targets(summary: pd.DataFrame, targets: Mapping[str, Mapping[str, float]] = SAF_TARGETS
                    ) -> pd.DataFrame:
    """Per split and target metric: the best system's mean value next to the target."""
    rows = []
    for split, tmetrics in targets.items():
        sub = summary[summary.split == split]
        if sub.empty:
            continue
        acc = sub[sub.metric == "accuracy"].sort_values("mean", ascending=False)
        best = acc.system.iloc[0] if len(acc) else None
        for metric, target in tmetrics.items():
            m = sub[sub.metric == metric]
            if m.empty:
                continue
            top = m.sort_values("mean", ascending=False).iloc[0]
            of_best = m[m.system == best]["mean"]
            rows.append({"split": split, "metric": metric, "target": target,
                         "best_value": float(top["mean"]), "best_system": top.system,
                         "value_of_most_accurate": float(of_best.iloc[0])
                         if len(of_best) else np.nan, "most_accurate_system": best,
                         "met": bool(top["mean"] >= target)})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- error analysis


def confusion_by_split(preds: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """Confusion matrix (gold × predicted + unparseable) per (system, split)."""
    from saf_utils.metrics import confusion

    out = {}
    for (system, split), g in preds.groupby(["system", "split"], sort=False):
        pred = [p if isinstance(p, str) else None for p in g.pred_label]
        out[(system, split)] = confusion(g.gold_label.tolist(), pred)
    return out


def _row_errors(preds: pd.DataFrame) -> pd.DataFrame:
    p = preds.copy()
    p["correct"] = p.pred_label == p.gold_label
    ps = pd.to_numeric(p.pred_score, errors="coerce")
    p["sq_error"] = np.where(ps.isna(), np.maximum(p.gold_score, 1 - p.gold_score) ** 2,
                             (ps - p.gold_score) ** 2)
    return p


def per_question_metrics(preds: pd.DataFrame) -> pd.DataFrame:
    """Accuracy, MSE (unparseable charged the worst error) and n per system/split/question."""
    p = _row_errors(preds)
    return (p.groupby(["system", "split", "question"], sort=False)
            .agg(n=("id", "size"), accuracy=("correct", "mean"), mse=("sq_error", "mean"))
            .reset_index())


def error_class_breakdown(preds: pd.DataFrame) -> pd.DataFrame | None:
    """Accuracy and miss rate per error class and system; None without ``error_class``."""
    if "error_class" not in preds.columns or preds.error_class.isna().all():
        return None
    p = _row_errors(preds)
    out = (p.groupby(["system", "split", "error_class"], sort=False)
           .agg(n=("id", "size"), accuracy=("correct", "mean")).reset_index())
    out["miss_rate"] = 1 - out.accuracy
    return out


def sentence_chrf(hyps: Sequence[str], refs: Sequence[str]) -> list[float]:
    """Per-pair chrF (0-100), for sorting and binning examples."""
    import sacrebleu

    return [float(sacrebleu.sentence_chrf(h or "", [r]).score)
            for h, r in zip(hyps, refs, strict=True)]


def worst_examples(preds: pd.DataFrame, n: int = 5) -> pd.DataFrame:
    """Wrong labels with the largest score error, then the lowest feedback chrF."""
    p = _row_errors(preds)
    p["feedback_chrf"] = sentence_chrf(p.pred_feedback.fillna("").astype(str).tolist(),
                                       p.gold_feedback.astype(str).tolist())
    p = p.sort_values(["correct", "sq_error", "feedback_chrf"], ascending=[True, False, True],
                      kind="stable")
    cols = ["system", "split", "question", "provided_answer", "gold_label", "pred_label",
            "gold_score", "pred_score", "gold_feedback", "pred_feedback", "feedback_chrf"]
    return p[cols].head(n).reset_index(drop=True)


def feedback_by_answer_length(preds: pd.DataFrame, bins: Sequence[float] = (0, 5, 10, 20, 40,
                                                                              np.inf)
                              ) -> pd.DataFrame:
    """Accuracy and mean sentence chrF of the feedback per answer-length bin (words)."""
    p = _row_errors(preds)
    p["answer_words"] = p.provided_answer.astype(str).str.split().str.len()
    edges = list(bins)
    names = [f"{int(lo)}+" if math.isinf(hi) else f"{int(lo)}-{int(hi) - 1}"
             for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    p["length_bin"] = pd.cut(p.answer_words, bins=edges, right=False, labels=names)
    p["feedback_chrf"] = sentence_chrf(p.pred_feedback.fillna("").astype(str).tolist(),
                                       p.gold_feedback.astype(str).tolist())
    out = (p.groupby(["system", "split", "length_bin"], sort=True, observed=True)
           .agg(n=("id", "size"), accuracy=("correct", "mean"),
                feedback_chrf=("feedback_chrf", "mean")).reset_index())
    out["length_bin"] = out.length_bin.astype(str)  # rows stay in bin order
    return out


def seen_unseen_gap(summary: pd.DataFrame, metrics: Sequence[str] = (
        "accuracy", "macro_f1", "sacrebleu", "bertscore_f1")) -> pd.DataFrame:
    """Per system and metric: unseen answers − unseen questions (mean over seeds)."""
    s = summary[summary.metric.isin(metrics)]
    wide = s.pivot_table(index=["system", "metric"], columns="split", values="mean")
    need = {"test_unseen_answers", "test_unseen_questions"}
    if not need <= set(wide.columns):
        return pd.DataFrame(columns=["system", "metric", "test_unseen_answers",
                                     "test_unseen_questions", "gap"])
    wide = wide[["test_unseen_answers", "test_unseen_questions"]].copy()
    wide["gap"] = wide.test_unseen_answers - wide.test_unseen_questions
    return wide.reset_index()
