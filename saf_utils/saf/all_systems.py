"""Every SAF system the runner and notebook 02 know: those of :mod:`saf_utils.saf.systems`
and one import line per module of further systems (each registers itself when imported;
import order is run order), collected in this one place (docs/recipes.md)."""

from __future__ import annotations

from saf_utils.saf.systems import SYSTEMS

__all__ = ["SYSTEMS"]
