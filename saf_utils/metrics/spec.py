"""What a report needs to know about a metric: which direction is better and on what scale.

The one table of metric metadata: the index's "highest"/"lowest" sentence, its bold best cell,
the choice on validation and the dot plots all read the direction from here. A metric that is
not listed is taken as higher-is-better on an unknown scale (stated, not guessed, in pages).
The metric cards page (:mod:`saf_utils.reporting.metric_cards`) is generated from the same
entries: definition, range, direction, implementation and reference.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """``scale``: "0-1", "0-100" (sacreBLEU, chrF), ">=0" (squared errors, losses), "count" or
    "any" (no fixed range); :func:`bounds` reads it.

    ``description`` is the short gloss (a header's tooltip); ``definition`` what is computed,
    ``implementation`` the function and library that compute it here, ``reference`` where the
    metric is defined (a paper or the library's documentation).
    """

    name: str
    higher_is_better: bool = True
    scale: str = "0-1"
    description: str = ""
    definition: str = ""
    implementation: str = ""
    reference: str = ""

    @property
    def range(self) -> str:
        """The scale in words."""
        return {"0-1": "0 to 1", "0-100": "0 to 100", ">=0": "0 or more",
                "count": "0 or more (a count)"}.get(
            self.scale, "no fixed range")

    @property
    def direction(self) -> str:
        return "higher is better" if self.higher_is_better else "lower is better"


METRICS: dict[str, Metric] = {}


def register_metric(metric: Metric) -> Metric:
    """Add a metric (a new one; the name must not be taken)."""
    if metric.name in METRICS and METRICS[metric.name] != metric:
        raise ValueError(f"metric {metric.name!r} is already registered differently")
    METRICS[metric.name] = metric
    return metric


def metric(name: str) -> Metric:
    """The metric's metadata; an unregistered name is higher-is-better on any scale."""
    return METRICS.get(name) or Metric(name, True, "any", "not registered")


def lower_is_better(name: str) -> bool:
    return not metric(name).higher_is_better


def bounds(name: str) -> tuple[float, float] | None:
    """The range a value of the metric lies in, from its scale ("0-1" -> (0, 1); ">=0" and
    "count" -> (0, inf)); None where the scale fixes none. Intervals are clipped to it."""
    scale = metric(name).scale
    if scale in (">=0", "count"):
        return (0.0, float("inf"))
    lo, sep, hi = scale.partition("-")
    try:
        return (float(lo), float(hi)) if sep else None
    except ValueError:
        return None


def scale_label(name: str) -> str:
    """Direction and range for a reader: "↑ 0–1", "↓ ≥ 0", "↑" (no fixed range)."""
    m = metric(name)
    arrow = "↑" if m.higher_is_better else "↓"
    b = bounds(name)
    if b is None:
        return arrow
    if b[1] == float("inf"):
        return f"{arrow} ≥ {b[0]:g}"
    return f"{arrow} {b[0]:g}–{b[1]:g}"


_LABELS = "saf_utils.metrics.labels.label_metrics (scikit-learn)"
_SKLEARN_F1 = "scikit-learn f1_score, https://scikit-learn.org/stable/modules/generated/" \
    "sklearn.metrics.f1_score.html"
_SACREBLEU = "Post (2018), A Call for Clarity in Reporting BLEU Scores, WMT"
_OUTPUTS = "saf_utils.metrics.overlap.output_stats"
_ARGSCICHAT = ("Ruggeri et al. (2023), A Dataset of Argumentative Dialogues on Scientific "
               "Papers (ArgSciChat), ACL")
for _m in (
    Metric("accuracy", description="share of exact labels",
           definition="Share of answers whose predicted label equals the gold label; an "
           "unparseable prediction counts as wrong.", implementation=_LABELS,
           reference="scikit-learn accuracy_score"),
    Metric("macro_f1", description="F1 per label, unweighted mean",
           definition="F1 of each SAF label (Correct, Partially correct, Incorrect), averaged "
           "without weights; unparseable predictions lower the gold label's recall and are "
           "not a class of their own.", implementation=_LABELS, reference=_SKLEARN_F1),
    Metric("weighted_f1", description="F1 per label, weighted by support",
           definition="F1 of each SAF label averaged with the number of gold answers of the "
           "label as weights.", implementation=_LABELS, reference=_SKLEARN_F1),
    Metric("mse", False, ">=0", "squared error of the score",
           definition="Mean squared error between predicted and gold scores (both 0-1), over "
           "the answers with a parseable score only.",
           implementation="saf_utils.metrics.labels.score_mse",
           reference="Filighera et al. (2022), Your Answer is Incorrect... Would you like to "
           "know why? Introducing a Bilingual Short Answer Feedback Dataset, ACL"),
    Metric("mse_max_penalty", False, ">=0", "MSE with unparseable scores set to the worst",
           definition="Mean squared error over all answers; an unparseable score is charged "
           "the largest possible error for its gold score, max(g, 1-g)^2, so failing to "
           "answer does not pay.", implementation="saf_utils.metrics.labels.score_mse",
           reference="this collection (a stricter variant of the SAF paper's MSE)"),
    Metric("unparseable_rate", False, description="share of outputs without a label",
           definition="Share of generated outputs from which no label (or score) could be "
           "parsed.", implementation="saf_utils.saf.formats (output parsing)",
           reference="this collection"),
    Metric("sacrebleu", scale="0-100", description="corpus BLEU (sacreBLEU)",
           definition="Corpus BLEU: geometric mean of 1-4-gram precisions with a brevity "
           "penalty, default 13a tokenisation, one reference per output.",
           implementation="saf_utils.metrics.generation.bleu (sacrebleu.corpus_bleu)",
           reference=_SACREBLEU),
    Metric("chrf", scale="0-100", description="character n-gram F-score (sacreBLEU)",
           definition="Corpus chrF: F-score (beta 2) of character 6-grams, sacreBLEU "
           "defaults.", implementation="saf_utils.metrics.generation.chrf "
           "(sacrebleu.corpus_chrf)",
           reference="Popović (2015), chrF: character n-gram F-score for automatic MT "
           "evaluation, WMT"),
    Metric("feedback_chrf", scale="0-100", description="chrF of the feedback alone",
           definition="chrF (as above) of the feedback text only, the label prefix removed.",
           implementation="saf_utils.metrics.generation.chrf on the parsed feedback",
           reference="Popović (2015), WMT"),
    Metric("rouge2", description="ROUGE-2 F1",
           definition="Mean per-output F-measure of word bigram overlap with the reference "
           "(Unicode-aware tokens, no stemming; an empty text scores 0).",
           implementation="saf_utils.metrics.generation.rouge (rouge-score)",
           reference="Lin (2004), ROUGE: A Package for Automatic Evaluation of Summaries"),
    Metric("meteor", description="METEOR (nltk)",
           definition="Mean per-output METEOR: unigram matches (exact, stem, WordNet "
           "synonym) with a fragmentation penalty.",
           implementation="saf_utils.metrics.generation.meteor (nltk meteor_score, WordNet "
           "3.0)", reference="Banerjee and Lavie (2005), METEOR, ACL workshop"),
    Metric("bertscore_f1", description="BERTScore F1",
           definition="Mean per-output BERTScore F1: greedy cosine matching of contextual "
           "token embeddings, no IDF, rescaled with bert-score's baseline where one ships.",
           implementation="saf_utils.metrics.embedding.bertscore_items (bert-score)",
           reference="Zhang et al. (2020), BERTScore: Evaluating Text Generation with BERT, "
           "ICLR"),
    Metric("moverscore", description="MoverScore",
           definition="Mean per-output MoverScore v2: earth mover's distance between IDF-"
           "weighted contextual embeddings (one IDF table from the references).",
           implementation="saf_utils.metrics.embedding.moverscore_items (own port of "
           "moverscore_v2)", reference="Zhao et al. (2019), MoverScore, EMNLP"),
    Metric("fact_f1", description="F1 of selected against gold fact sentences",
           definition="Per message pair: set F1 of the selected paper sentences against the "
           "gold fact sentences (0 when either set is empty); mean over pairs with gold "
           "facts.", implementation="saf_utils.metrics.overlap.fact_f1",
           reference=_ARGSCICHAT),
    Metric("message_f1", description="token F1 of the reply (ArgSciChat card)",
           definition="Per reply: F1 of whitespace tokens against the gold reply, no "
           "normalisation (as the ArgSciChat model card).",
           implementation="saf_utils.metrics.overlap.message_f1",
           reference=_ARGSCICHAT),
    Metric("message_f1_squad", description="token F1 with SQuAD normalisation",
           definition="Per reply: token F1 after lower-casing and removing punctuation and "
           "articles.", implementation="saf_utils.metrics.overlap.message_f1_squad",
           reference="Rajpurkar et al. (2016), SQuAD, EMNLP; allenai/qasper-led-baseline"),
    Metric("content_f1", description="F1 over content words (stop words out)",
           definition="Per reply: token F1 on SQuAD-normalised tokens without English stop "
           "words, so a reply of frequent function words scores low.",
           implementation="saf_utils.metrics.overlap.content_f1 (scikit-learn stop words)",
           reference="this collection"),
    Metric("distinct_2", description="distinct bigrams / bigrams",
           definition="Distinct word bigrams over all bigrams of a system's outputs (1: no "
           "bigram reused).", implementation=_OUTPUTS,
           reference="Li et al. (2016), A Diversity-Promoting Objective Function for Neural "
           "Conversation Models, NAACL"),
    Metric("repetition", False, description="share of repeated tokens in an output",
           definition="Mean share of an output's tokens that repeat an earlier token of the "
           "same output.", implementation=_OUTPUTS, reference="this collection"),
    Metric("identical_outputs", False, description="share of the most frequent output",
           definition="Share of outputs equal to the system's most frequent output (1: one "
           "reply for everything).", implementation=_OUTPUTS, reference="this collection"),
    Metric("empty_share", False, description="share of empty outputs",
           definition="Share of outputs that are empty or whitespace.",
           implementation="saf_utils.argscichat.generation", reference="this collection"),
    Metric("train_loss", False, "any", "training loss at the end",
           definition="Mean training loss reported by the trainer at the end of fine-tuning.",
           implementation="saf_utils.seq2seq (transformers Trainer)",
           reference="transformers documentation"),
):
    register_metric(_m)
