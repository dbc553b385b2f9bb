"""Text-generation metrics: sacreBLEU, chrF, ROUGE-2 (on :func:`saf_utils.text.word_tokens`:
rouge-score's tokenizer deletes ä, ö, ü, ß) and METEOR (nltk with a local English WordNet, a
:class:`MissingResourceError` without one, never a silent 0)."""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from saf_utils.metrics.base import METRICS, register_metric
from saf_utils.metrics.checks import MissingResourceError, check_pairs, per_distinct_pair
from saf_utils.text import word_tokens


class UnicodeWordTokenizer:
    """Lower-cased Unicode ``\\w+`` runs (rouge-score's tokenizer keeps only ``[a-z0-9]``);
    an optional stemmer callable (none by default: Porter is English-only)."""

    def __init__(self, stemmer: Any = None) -> None:
        self.stemmer = stemmer

    def tokenize(self, text: str) -> list[str]:
        tokens = word_tokens(text)
        if self.stemmer is not None:
            tokens = [self.stemmer(t) for t in tokens]
        return tokens


#: Per-segment statistics already extracted, per (metric, its arguments): (hyp, ref) -> row.
_SEGMENT_STATS: dict[tuple[Any, ...], dict[tuple[str, str], list[int]]] = {}
#: Distinct pairs kept per metric before the cache starts afresh (a long Lab session over
#: many corpora must not grow without bound; a report holds a few tens of thousands).
SEGMENT_CACHE_LIMIT = 500_000


def _sacrebleu_stats(metric: Any, refs: Sequence[str], hyps: Sequence[str],
                     key: tuple[Any, ...] = ()
                     ) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """sacreBLEU's own per-segment statistics and the score of their integer sums (exactly
    ``corpus_score(...).score``, for the corpus and any resample); each distinct pair
    extracted once per process and ``key`` (the metric's arguments): feedback repeats."""
    hyps, refs = check_pairs(hyps, refs)
    cache = _SEGMENT_STATS.setdefault((type(metric).__name__, *key), {})
    pairs = list(zip(hyps, refs, strict=True))
    missing = [p for p in dict.fromkeys(pairs) if p not in cache]
    if len(cache) + len(missing) > SEGMENT_CACHE_LIMIT:
        cache.clear()
        missing = list(dict.fromkeys(pairs))
    if missing:
        found = metric._extract_corpus_statistics([h for h, _ in missing],
                                                  [[r for _, r in missing]])
        cache.update(zip(missing, found, strict=True))
    stats = np.asarray([cache[p] for p in pairs], dtype=float)

    def score(s: np.ndarray) -> np.ndarray:  # integer sums -> same floats as corpus_score
        rows = np.rint(s).astype(np.int64).tolist()
        return np.array([metric._compute_score_from_stats(r).score for r in rows])

    return stats, score


_SACREBLEU = "Post (2018), A Call for Clarity in Reporting BLEU Scores, WMT"
_CHRF = "Popović (2015), chrF: character n-gram F-score for automatic MT evaluation, WMT"


@register_metric("sacrebleu", level="corpus", scale="0-100", inputs="texts",
                 library="sacrebleu", description="corpus BLEU (sacreBLEU)",
                 definition="Corpus BLEU: geometric mean of 1-4-gram precisions with a brevity "
                 "penalty, default 13a tokenisation, one reference per output.",
                 reference=_SACREBLEU)
def bleu_stats(refs: Sequence[str], hyps: Sequence[str], **bleu_args: Any):
    """Corpus sacreBLEU (0-100) from per-segment statistics (``sacrebleu.metrics.BLEU``)."""
    from sacrebleu.metrics import BLEU

    return _sacrebleu_stats(BLEU(**bleu_args), refs, hyps, tuple(sorted(bleu_args.items())))


@register_metric("chrf", level="corpus", scale="0-100", inputs="texts", library="sacrebleu",
                 description="character n-gram F-score (sacreBLEU)",
                 definition="Corpus chrF: F-score (beta 2) of character 6-grams, sacreBLEU "
                 "defaults.", reference=_CHRF)
def chrf_stats(refs: Sequence[str], hyps: Sequence[str], **chrf_args: Any):
    """Corpus chrF (0-100) from per-segment statistics (``sacrebleu.metrics.CHRF``)."""
    from sacrebleu.metrics import CHRF

    return _sacrebleu_stats(CHRF(**chrf_args), refs, hyps, tuple(sorted(chrf_args.items())))


def bleu(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Corpus sacreBLEU (default 13a tokenisation), one reference per hypothesis, 0-100."""
    return METRICS["sacrebleu"].score(refs, hyps).value


def chrf(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Corpus chrF (sacreBLEU defaults: char 6-grams, beta 2), 0-100."""
    return METRICS["chrf"].score(refs, hyps).value


@register_metric("feedback_chrf", scale="0-100", inputs="texts", library="sacrebleu",
                 description="chrF of the feedback alone",
                 definition="Sentence chrF (sacreBLEU defaults) of the feedback text only, "
                 "the label prefix removed; for sorting and binning examples.",
                 reference=_CHRF)
def sentence_chrf(refs: Sequence[str], hyps: Sequence[str]) -> list[float]:
    """Per-pair chrF (0-100) of parallel texts (an empty output is ``""``)."""
    import sacrebleu

    hyps, refs = check_pairs(hyps, refs)
    return [float(sacrebleu.sentence_chrf(h, [r]).score) for h, r in zip(hyps, refs, strict=True)]


@register_metric("rouge2", inputs="texts", library="rouge-score", description="ROUGE-2 F1",
                 definition="Mean per-output F-measure of word bigram overlap with the "
                 "reference (Unicode-aware tokens, no stemming; an empty text scores 0). A "
                 "perfect one-word reply scores 0 by definition: it has no bigram.",
                 reference="Lin (2004), ROUGE: A Package for Automatic Evaluation of "
                 "Summaries")
def rouge2_items(refs: Sequence[str], hyps: Sequence[str]) -> list[float]:
    """Per-pair ROUGE-2 F-measure with :class:`UnicodeWordTokenizer` (no stemming), each
    distinct pair computed once."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge2"], use_stemmer=False,
                                      tokenizer=UnicodeWordTokenizer())
    return per_distinct_pair(lambda hs, rs: [scorer.score(target=r, prediction=h)["rouge2"]
                                             .fmeasure for h, r in zip(hs, rs, strict=True)],
                             hyps, refs)


# WordNet 3.0 lexicographer file names in file-number order (wndb lexnames(5WN)), each with
# its syntactic category (1 noun, 2 verb, 3 adjective, 4 adverb). Debian's wordnet-base
# ships the database without this file, which nltk's reader insists on opening.
_LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant "
    "noun.possession noun.process noun.quantity noun.relation noun.shape noun.state "
    "noun.substance noun.time verb.body verb.change verb.cognition verb.communication "
    "verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl").split()
_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_LEXNAMES_TEXT = "".join(f"{i:02d}\t{name}\t{_CATEGORY[name.split('.')[0]]}\n"
                         for i, name in enumerate(_LEXNAMES))

_REPO_ROOT = Path(__file__).resolve().parents[2]
_WORDNET_HELP = (
    "WordNet is needed for METEOR and is not installed. Get it with "
    "`apt-get install wordnet-base` (files in /usr/share/wordnet) or `make wordnet` "
    "(unpacks it under .cache/wordnet), or point WORDNET_DIR at a WordNet 3.0 dict folder "
    "(the one holding data.noun, index.noun, ...)."
)


def _is_wordnet_dir(path: Path) -> bool:
    return all((path / f).is_file() for f in ("data.noun", "index.noun", "noun.exc"))


def find_wordnet(wordnet_dir: str | os.PathLike[str] | None = None) -> Any:
    """Locate WordNet: argument, ``$WORDNET_DIR``, nltk data, Debian, repo ``.cache``; an
    explicit one without WordNet raises (a typo must not switch databases)."""
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


@register_metric("meteor", inputs="texts", library="nltk meteor_score, WordNet 3.0",
                 description="METEOR (nltk)",
                 definition="Mean per-output METEOR: unigram matches (exact, stem, WordNet "
                 "synonym) with a fragmentation penalty. A perfect reply scores below 1 by "
                 "definition: the penalty 0.5 x (chunks / matches)^3 costs a perfect "
                 "one-word reply half its score (0.5).",
                 reference="Banerjee and Lavie (2005), METEOR, ACL workshop")
def meteor_items(refs: Sequence[str], hyps: Sequence[str],
                 wordnet_dir: str | os.PathLike[str] | None = None) -> list[float]:
    """Per-pair METEOR (nltk ``meteor_score``, 0-1) on :class:`UnicodeWordTokenizer` tokens,
    each distinct pair once; English stemmer and WordNet (on German nearly exact-match); a
    pair without word tokens on either side scores 0.0."""
    from nltk.translate.meteor_score import meteor_score

    check_pairs(hyps, refs)
    wn = load_wordnet(wordnet_dir)
    tok = UnicodeWordTokenizer()

    def one(hyp: str, ref: str) -> float:
        h, r = tok.tokenize(hyp), tok.tokenize(ref)
        return meteor_score([r], h, wordnet=wn) if h and r else 0.0

    return per_distinct_pair(lambda hs, rs: [one(h, r) for h, r in zip(hs, rs, strict=True)],
                             hyps, refs)
