"""Every registered ArgSciChat system, in one place: the fact selectors
(:mod:`saf_utils.argscichat.selectors`) and the reply systems
(:mod:`saf_utils.argscichat.replies`). A new module of systems is imported here (one line)."""

from __future__ import annotations

from saf_utils.argscichat.replies import REPLY_SYSTEMS
from saf_utils.argscichat.selectors import SELECTORS

__all__ = ["REPLY_SYSTEMS", "SELECTORS"]
