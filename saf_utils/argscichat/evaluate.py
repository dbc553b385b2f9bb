"""The evaluation of both ArgSciChat tasks, under the module name both task packages share:
:mod:`selection <saf_utils.argscichat.selection_evaluation>` (03: Fact-F1 items, the
per-fold val choices, headline and comparisons) and :mod:`replies
<saf_utils.argscichat.reply_evaluation>` (04: reply scores, the val choice, headline and
comparisons). They stay two modules (``analyse_selection`` / ``analyse_replies``,
``selection_sentences`` / ``reply_sentences``): each reads one task's predictions."""

from __future__ import annotations

from saf_utils.argscichat import reply_evaluation as replies
from saf_utils.argscichat import selection_evaluation as selection

__all__ = ["replies", "selection"]
