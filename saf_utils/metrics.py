"""Pure evaluation metrics for the SAF and ArgSciChat notebooks.

Everything here is deterministic and CPU-only. Text metrics take parallel lists
(hypotheses first, references second) and refuse lists of different lengths, because a
silent ``zip`` truncation is the classic way to report a metric on the wrong pairs.
Embedding-based metrics (BERTScore, MoverScore) live in :mod:`saf_utils.embedding_metrics`.
"""

from __future__ import annotations

import io
import os
import re
import string
import warnings
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from saf_utils.data import SAF_LABELS

__all__ = [
    "MissingResourceError",
    "UnicodeWordTokenizer",
    "bleu",
    "chrf",
    "confusion",
    "fact_f1",
    "find_wordnet",
    "fold_summary",
    "label_metrics",
    "load_wordnet",
    "message_f1",
    "message_f1_squad",
    "meteor",
    "normalize_answer",
    "rouge",
    "score_mse",
]

#: SAF verification-feedback labels, in the order used for reports.

_UNPARSEABLE = "<unparseable>"


class MissingResourceError(RuntimeError):
    """A data resource a metric needs (e.g. WordNet) is not installed locally."""


def _check_parallel(hyps: Sequence[Any], refs: Sequence[Any], what: str = "hyps/refs") -> None:
    if len(hyps) != len(refs):
        raise ValueError(
            f"{what}: lists must be parallel, got {len(hyps)} hypotheses and {len(refs)} "
            "references"
        )
    if len(hyps) == 0:
        raise ValueError(f"{what}: empty input, nothing to score")


# --------------------------------------------------------------------------------------
# ArgSciChat overlap metrics
# --------------------------------------------------------------------------------------


def fact_f1(pred_sentences: Iterable[Hashable], gold_sentences: Iterable[Hashable]) -> float:
    """Set-based F1 between predicted and gold fact sentences (ids or strings).

    Precision over the predicted set, recall over the gold set; 0.0 when either set is
    empty. Equals the official ArgSciChat script's ``sklearn`` binary F1 on sentence masks
    (duplicates collapse, as they do in a mask).
    """
    pred, gold = set(pred_sentences), set(gold_sentences)
    if not pred or not gold:
        return 0.0
    hit = len(pred & gold)
    if hit == 0:
        return 0.0
    precision, recall = hit / len(pred), hit / len(gold)
    return 2 * precision * recall / (precision + recall)


def fold_summary(scores_by_fold: Mapping[int, Sequence[float]]) -> dict[str, Any]:
    """Official ArgSciChat aggregation: mean per fold, then mean and std over the folds.

    Per-query scores go in (the caller keeps only queries with at least one gold fact).
    ``std`` is the *population* std over fold means (``np.std``, ``ddof=0``), i.e. what
    ``np.std`` on the list of fold means gives in the official scripts.

    Returns ``{"per_fold": {fold: mean}, "mean": float, "std": float, "n": {fold: count}}``.
    """
    if not scores_by_fold:
        raise ValueError("fold_summary: no folds given")
    per_fold: dict[int, float] = {}
    n: dict[int, int] = {}
    for fold in sorted(scores_by_fold):
        vals = np.asarray(list(scores_by_fold[fold]), dtype=float)
        if vals.size == 0:
            raise ValueError(f"fold_summary: fold {fold} has no scored queries")
        per_fold[fold] = float(vals.mean())
        n[fold] = int(vals.size)
    means = np.array(list(per_fold.values()))
    return {
        "per_fold": per_fold,
        "mean": float(means.mean()),
        "std": float(means.std(ddof=0)),
        "n": n,
    }


def _token_f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    num_same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def message_f1(pred: str, gold: str) -> float:
    """Token F1 as in the ArgSciChat model card: ``str.split()`` tokens, no normalisation.

    Case and punctuation count ("Yes." != "yes"). Empty case follows the SQuAD v2
    convention: if either side has no tokens (empty or whitespace-only), the score is
    ``float(pred_tokens == gold_tokens)``, so two empty messages score 1.0.
    See :func:`message_f1_squad` for the normalised LED/Qasper variant.
    """
    pred_tokens, gold_tokens = pred.split(), gold.split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    return _token_f1(pred_tokens, gold_tokens)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, drop ASCII punctuation, drop a/an/the, squash spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


_PUNCT = frozenset(string.punctuation)


def message_f1_squad(pred: str, gold: str) -> float:
    """Token F1 after SQuAD normalisation, as ``token_f1_score`` in allenai/qasper-led-baseline.

    Replicates the official LED/Qasper code exactly, including its empty case: the score is
    0.0 whenever no token overlaps, so two empty (or whitespace/punctuation/article-only)
    messages score 0.0 here, unlike :func:`message_f1`.
    """
    return _token_f1(normalize_answer(pred).split(), normalize_answer(gold).split())


# --------------------------------------------------------------------------------------
# SAF label and score metrics
# --------------------------------------------------------------------------------------


def _map_labels(
    gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str]
) -> tuple[list[str], list[str], int]:
    _check_parallel(pred, gold, "gold/pred")
    allowed = set(labels)
    bad_gold = sorted({g for g in gold if g not in allowed}, key=str)
    if bad_gold:
        raise ValueError(f"gold labels outside {list(labels)}: {bad_gold}")
    bad_pred = sorted({p for p in pred if p is not None and p not in allowed}, key=str)
    if bad_pred:
        raise ValueError(
            f"predicted labels outside {list(labels)}: {bad_pred}; map unparseable outputs "
            "to None"
        )
    mapped = [_UNPARSEABLE if p is None else p for p in pred]
    return list(gold), mapped, sum(p is None for p in pred)


def label_metrics(
    gold: Sequence[str],
    pred: Sequence[str | None],
    labels: Sequence[str] = SAF_LABELS,
) -> dict[str, float | int]:
    """Accuracy and macro/weighted F1 over SAF labels; ``None`` predictions = unparseable.

    Unparseable predictions count as wrong but are *not* a fourth class: macro F1
    averages over ``labels`` only (they lower recall of the gold class). Predictions that
    are neither a label nor None raise, so parsing bugs cannot pass silently.
    """
    from sklearn.metrics import f1_score

    g, p, n_bad = _map_labels(gold, pred, labels)
    kw = {"labels": list(labels), "zero_division": 0}
    return {
        "accuracy": float(np.mean([a == b for a, b in zip(g, p, strict=True)])),
        "macro_f1": float(f1_score(g, p, average="macro", **kw)),
        "weighted_f1": float(f1_score(g, p, average="weighted", **kw)),
        "n": len(g),
        "n_unparseable": n_bad,
    }


def score_mse(gold: Sequence[float], pred: Sequence[float | None]) -> dict[str, float | int]:
    """MSE of SAF scores in [0, 1]; ``None`` (or NaN) predictions are unparseable.

    ``mse`` is over parseable pairs only (NaN if there are none); ``mse_max_penalty`` is
    over all pairs, charging each unparseable one the largest possible squared error for
    its gold score, ``max(g, 1 - g) ** 2``, so a model cannot gain by failing to answer.
    """
    _check_parallel(pred, gold, "gold/pred")
    g = np.asarray(gold, dtype=float)
    if np.any((g < 0) | (g > 1)) or np.any(np.isnan(g)):
        raise ValueError("score_mse: gold scores must lie in [0, 1]")
    p = np.array([np.nan if x is None else float(x) for x in pred], dtype=float)
    ok = ~np.isnan(p)
    sq = np.where(ok, (np.where(ok, p, 0.0) - g) ** 2, np.maximum(g, 1 - g) ** 2)
    return {
        "mse": float(sq[ok].mean()) if ok.any() else float("nan"),
        "mse_max_penalty": float(sq.mean()),
        "n": int(g.size),
        "n_unparseable": int((~ok).sum()),
    }


def confusion(
    gold: Sequence[str], pred: Sequence[str | None], labels: Sequence[str] = SAF_LABELS
) -> pd.DataFrame:
    """Confusion counts: rows = gold label, columns = predicted label + ``"unparseable"``."""
    g, p, _ = _map_labels(gold, pred, labels)
    cols = [*labels, "unparseable"]
    table = pd.DataFrame(0, index=pd.Index(list(labels), name="gold"),
                         columns=pd.Index(cols, name="pred"), dtype=int)
    for a, b in zip(g, p, strict=True):
        table.loc[a, "unparseable" if b == _UNPARSEABLE else b] += 1
    return table


# --------------------------------------------------------------------------------------
# Text generation metrics
# --------------------------------------------------------------------------------------


class UnicodeWordTokenizer:
    """Lower-cases and keeps ``\\w+`` runs (Unicode-aware); optional stemmer callable.

    rouge-score's default tokenizer keeps only ``[a-z0-9]``, which deletes ä/ö/ü/ß and
    splits German words apart; this keeps them. No stemming by default (the Porter stemmer
    is English-only).
    """

    _WORD = re.compile(r"\w+", re.UNICODE)

    def __init__(self, stemmer: Any = None) -> None:
        self.stemmer = stemmer

    def tokenize(self, text: str) -> list[str]:
        tokens = self._WORD.findall(text.lower())
        if self.stemmer is not None:
            tokens = [self.stemmer(t) for t in tokens]
        return tokens


def bleu(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Corpus sacreBLEU (default 13a tokenisation), one reference per hypothesis, 0-100."""
    import sacrebleu

    _check_parallel(hyps, refs)
    return float(sacrebleu.corpus_bleu(list(hyps), [list(refs)]).score)


def chrf(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Corpus chrF (sacreBLEU defaults: char 6-grams, beta 2), 0-100."""
    import sacrebleu

    _check_parallel(hyps, refs)
    return float(sacrebleu.corpus_chrf(list(hyps), [list(refs)]).score)


def rouge(
    hyps: Sequence[str], refs: Sequence[str], tokenizer: Any = None
) -> dict[str, float]:
    """Mean ROUGE-1/2/L F-measures (0-1) with a Unicode-aware tokenizer, no stemming.

    Uses rouge-score with :class:`UnicodeWordTokenizer` unless another object with a
    ``.tokenize(text)`` method is given. Empty texts score 0 for that pair.
    """
    from rouge_score import rouge_scorer

    _check_parallel(hyps, refs)
    types = ("rouge1", "rouge2", "rougeL")
    scorer = rouge_scorer.RougeScorer(
        list(types), use_stemmer=False, tokenizer=tokenizer or UnicodeWordTokenizer()
    )
    totals = dict.fromkeys(types, 0.0)
    for hyp, ref in zip(hyps, refs, strict=True):
        scores = scorer.score(target=ref, prediction=hyp)
        for t in types:
            totals[t] += scores[t].fmeasure
    return {t: totals[t] / len(hyps) for t in types}


# WordNet 3.0 lexicographer file names (wndb lexnames(5WN)). Debian's wordnet-base
# ships the database without this file, which nltk's reader insists on opening.
_LEXNAMES = [
    ("adj.all", 3), ("adj.pert", 3), ("adv.all", 4), ("noun.Tops", 1), ("noun.act", 1),
    ("noun.animal", 1), ("noun.artifact", 1), ("noun.attribute", 1), ("noun.body", 1),
    ("noun.cognition", 1), ("noun.communication", 1), ("noun.event", 1),
    ("noun.feeling", 1), ("noun.food", 1), ("noun.group", 1), ("noun.location", 1),
    ("noun.motive", 1), ("noun.object", 1), ("noun.person", 1), ("noun.phenomenon", 1),
    ("noun.plant", 1), ("noun.possession", 1), ("noun.process", 1), ("noun.quantity", 1),
    ("noun.relation", 1), ("noun.shape", 1), ("noun.state", 1), ("noun.substance", 1),
    ("noun.time", 1), ("verb.body", 2), ("verb.change", 2), ("verb.cognition", 2),
    ("verb.communication", 2), ("verb.competition", 2), ("verb.consumption", 2),
    ("verb.contact", 2), ("verb.creation", 2), ("verb.emotion", 2), ("verb.motion", 2),
    ("verb.perception", 2), ("verb.possession", 2), ("verb.social", 2),
    ("verb.stative", 2), ("verb.weather", 2), ("adj.ppl", 3),
]
_LEXNAMES_TEXT = "".join(f"{i:02d}\t{name}\t{cat}\n" for i, (name, cat) in enumerate(_LEXNAMES))

_REPO_ROOT = Path(__file__).resolve().parents[1]
_WORDNET_HELP = (
    "WordNet is needed for METEOR and is not installed. Get it with "
    "`apt-get install wordnet-base` (files in /usr/share/wordnet) or `make wordnet` "
    "(unpacks it under .cache/wordnet), or point WORDNET_DIR at a WordNet 3.0 dict folder "
    "(the one holding data.noun, index.noun, ...)."
)


def _is_wordnet_dir(path: Path) -> bool:
    return all((path / f).is_file() for f in ("data.noun", "index.noun", "noun.exc"))


def find_wordnet(wordnet_dir: str | os.PathLike[str] | None = None) -> Any:
    """Locate WordNet: argument, ``$WORDNET_DIR``, nltk data, Debian, repo ``.cache``.

    Returns a folder path (or nltk's path pointer for nltk-managed data). An explicit
    argument or env var that does not hold WordNet raises instead of falling through, so a
    typo cannot silently switch databases. Raises :class:`MissingResourceError` if absent.
    """
    for explicit, source in ((wordnet_dir, "wordnet_dir"),
                             (os.environ.get("WORDNET_DIR") or None, "WORDNET_DIR")):
        if explicit is not None:
            path = Path(explicit).expanduser()
            if not _is_wordnet_dir(path):
                raise MissingResourceError(f"{source}={path} holds no WordNet. {_WORDNET_HELP}")
            return path.resolve()
    import nltk

    try:
        found = nltk.data.find("corpora/wordnet")
    except LookupError:
        found = None
    if found is not None:
        folder = getattr(found, "path", None)
        return Path(folder).resolve() if folder and os.path.isdir(folder) else found
    for cand in (Path("/usr/share/wordnet"), _REPO_ROOT / ".cache/wordnet/usr/share/wordnet"):
        if _is_wordnet_dir(cand):
            return cand.resolve()
    raise MissingResourceError(_WORDNET_HELP)


_WORDNET_READERS: dict[str, Any] = {}


def _make_wordnet_reader(root: Any) -> Any:
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class _Reader(WordNetCorpusReader):
        """nltk reader tolerant of Debian's wordnet-base (no ``lexnames``, no nltk data)."""

        def open(self, file: str) -> Any:  # noqa: A003 - nltk API name
            if file == "lexnames" and isinstance(root, Path) and not (root / file).exists():
                return io.StringIO(_LEXNAMES_TEXT)
            return super().open(file)

        def map_wn(self, version: str = "wordnet") -> None:
            # Only feeds Open Multilingual WordNet (unused here); nltk would look up its
            # own ``corpora/wordnet`` (absent offline) to build a 3.0 -> 3.0 sense map.
            return None

    if isinstance(root, Path):
        # nltk >= 3.9 only reads corpora below an ``nltk.data.path`` root.
        if str(root) not in nltk.data.path:
            nltk.data.path.append(str(root))
    with warnings.catch_warnings():  # "multilingual functions are not available"
        warnings.simplefilter("ignore", UserWarning)
        return _Reader(str(root) if isinstance(root, Path) else root, None)


def load_wordnet(wordnet_dir: str | os.PathLike[str] | None = None) -> Any:
    """A cached nltk ``WordNetCorpusReader`` for the WordNet found by :func:`find_wordnet`."""
    root = find_wordnet(wordnet_dir)
    key = str(root)
    if key not in _WORDNET_READERS:
        _WORDNET_READERS[key] = _make_wordnet_reader(root)
    return _WORDNET_READERS[key]


def meteor(
    hyps: Sequence[str],
    refs: Sequence[str],
    wordnet_dir: str | os.PathLike[str] | None = None,
) -> float:
    """Mean per-pair METEOR (nltk ``meteor_score``, 0-1), one reference per hypothesis.

    Tokens come from :class:`UnicodeWordTokenizer` (nltk's ``word_tokenize`` needs punkt,
    which is not available offline). nltk's METEOR uses the English Porter stemmer and
    English WordNet, so on German text it is essentially exact-match METEOR. A pair where
    either side has no word tokens scores 0.0. Raises
    :class:`MissingResourceError` when WordNet is missing (never a silent 0).
    """
    from nltk.translate.meteor_score import meteor_score

    _check_parallel(hyps, refs)
    wn = load_wordnet(wordnet_dir)
    tok = UnicodeWordTokenizer()
    total = 0.0
    for hyp, ref in zip(hyps, refs, strict=True):
        h, r = tok.tokenize(hyp), tok.tokenize(ref)
        total += meteor_score([r], h, wordnet=wn) if h and r else 0.0
    return total / len(hyps)
