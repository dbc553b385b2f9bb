"""The one metric layer of both tasks.

- :mod:`.overlap`: Fact-F1, Message-F1 (card and SQuAD), content-word F1, output statistics
- :mod:`.labels`: accuracy, macro/weighted F1, score MSE, confusion (any label set)
- :mod:`.generation`: sacreBLEU, chrF, ROUGE-1/2/L, METEOR
- :mod:`.embedding`: BERTScore and MoverScore (models load lazily, on first use)

Conventions, the same in both tasks (docs/metrics.md): text inputs must be
strings (``None`` raises naming its position); an empty generation is scored as ``""``;
MoverScore weights both sides with the references' IDF; models run on ``device="auto"``.
"""

from saf_utils.metrics.checks import MissingResourceError, check_pairs, check_texts
from saf_utils.metrics.generation import (
    UnicodeWordTokenizer,
    bleu,
    chrf,
    find_wordnet,
    load_wordnet,
    meteor,
    rouge,
)
from saf_utils.metrics.labels import confusion, label_metrics, score_mse
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
    "MissingResourceError", "UnicodeWordTokenizer", "bleu", "check_pairs", "check_texts",
    "chrf", "confusion", "content_f1", "content_tokens", "fact_f1", "find_wordnet",
    "label_metrics", "load_wordnet", "message_f1", "message_f1_squad", "meteor",
    "normalize_answer", "output_stats", "rouge", "score_mse",
]
