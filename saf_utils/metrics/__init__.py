"""The one metric layer of both tasks: every metric is a registered
:class:`~saf_utils.metrics.base.Metric` (:data:`METRICS`, looked up with :func:`metric`):
labels, generation (sacreBLEU, chrF, ROUGE-2, METEOR), embedding (BERTScore), mover (MoverScore)
and overlap (Fact-F1, Message-F1, content-word F1, output statistics). Conventions
(docs/metrics.md): ``(gold, pred)``, references first; an empty generation is ``""``.
"""

from saf_utils.metrics import embedding as _embedding  # noqa: E402,F401  (registers its metrics)
from saf_utils.metrics import mover as _mover  # noqa: E402,F401  (registers its metric)
from saf_utils.metrics.base import (
    METRICS,
    Metric,
    Score,
    add_metric,
    bounds,
    lower_is_better,
    metric,
    of_level,
    register_metric,
    scale_label,
)
from saf_utils.metrics.checks import MissingResourceError, check_pairs, check_texts
from saf_utils.metrics.generation import (
    UnicodeWordTokenizer,
    bleu,
    chrf,
    find_wordnet,
    load_wordnet,
)
from saf_utils.metrics.labels import confusion
from saf_utils.metrics.overlap import (
    content_f1,
    content_tokens,
    fact_f1,
    message_f1,
    message_f1_squad,
    normalize_answer,
    output_stats,
)

__all__ = [
    "METRICS", "Metric", "MissingResourceError", "Score", "UnicodeWordTokenizer", "add_metric",
    "bleu", "bounds", "check_pairs", "check_texts", "chrf", "confusion", "content_f1",
    "content_tokens", "fact_f1", "find_wordnet", "load_wordnet",
    "lower_is_better", "message_f1", "message_f1_squad", "metric",
    "normalize_answer", "of_level", "output_stats", "register_metric",
    "scale_label",
]
