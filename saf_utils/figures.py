"""What a notebook displays: :func:`show`, the one way to display a figure (PNG with alt text,
a warning when :func:`overlaps` finds text over text), and :func:`readable_tables`."""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Sequence
from itertools import combinations
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

#: How a page shows a missing value in a table.
MISSING = "—"

#: The dots per inch of a displayed figure (matplotlib's inline default is 100).
DPI = 100


class FigureOverlapWarning(UserWarning):
    """A figure draws text over other text, or a legend over the plot."""


def palette(n: int) -> list[tuple[float, float, float]]:
    """``n`` categorical colours a reader can tell apart: tab10, then Set3's twelve (tab20 pairs
    each with a pale twin); beyond 22 they repeat."""
    colours = [*plt.get_cmap("tab10").colors, *plt.get_cmap("Set3").colors]  # type: ignore
    return [tuple(colours[i % len(colours)]) for i in range(n)]


def wrap_label(text: str, width: int = 12) -> str:
    """``text`` in lines of at most ``width`` characters, broken after ``_`` or a space (a
    longer word stays whole): ``test_unseen_questions`` -> ``test_unseen_`` / ``questions``."""
    lines: list[str] = []
    for piece in re.split(r"(?<=[_ ])", text):
        if lines and len(lines[-1]) + len(piece.rstrip()) <= width:
            lines[-1] += piece
        else:
            lines.append(piece)
    return "\n".join(line.rstrip() for line in lines if line.strip())


def wrap_ticks(ax: Any, axis: str = "x", width: int = 12) -> None:
    """The tick labels of ``ax``'s ``axis`` wrapped (:func:`wrap_label`), not rotated."""
    ticks = getattr(ax, f"get_{axis}ticks")()
    labels = [wrap_label(t.get_text(), width) for t in getattr(ax, f"get_{axis}ticklabels")()]
    getattr(ax, f"set_{axis}ticks")(ticks, labels, rotation=0)


def _texts(texts: Sequence[Any], renderer: Any) -> list[tuple[str, Bbox]]:
    return [(t.get_text(), t.get_window_extent(renderer)) for t in texts
            if t.get_visible() and t.get_text().strip()]


def _overlap(a: Bbox, b: Bbox, tolerance: float = 1.0) -> bool:
    """Overlap by more than ``tolerance`` pixels both ways (touching boxes are fine)."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > tolerance
            and min(a.y1, b.y1) - max(a.y0, b.y0) > tolerance)


def overlaps(fig: Figure) -> list[str]:
    """What overlaps in ``fig`` once drawn, one line each: two tick labels of one axis, two
    titles (axes' or the suptitle), a legend over any plotting area, title or tick label."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    found: list[str] = []
    axes = [ax for ax in fig.axes if ax.get_visible()]
    titles: list[tuple[str, Bbox]] = []
    ticks: list[tuple[str, Bbox]] = []
    for ax in axes:
        for axis in ("x", "y"):
            labels = _texts(getattr(ax, f"get_{axis}ticklabels")(), renderer)
            ticks += labels
            for (ta, a), (tb, b) in combinations(labels, 2):
                if _overlap(a, b):
                    found.append(f"{axis} tick labels {ta!r} and {tb!r} overlap "
                                 f"(axes {ax.get_title()!r})")
        titles += _texts([ax.title, ax._left_title, ax._right_title], renderer)
    if fig._suptitle is not None:
        titles += _texts([fig._suptitle], renderer)
    for (ta, a), (tb, b) in combinations(titles, 2):
        if _overlap(a, b):
            found.append(f"titles {ta!r} and {tb!r} overlap")
    legends = [ax.get_legend() for ax in axes if ax.get_legend() is not None] + list(fig.legends)
    for legend in legends:
        if not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer)
        name = legend.get_title().get_text() or "legend"
        for ax in axes:
            if _overlap(box, ax.get_window_extent(renderer)):
                found.append(f"legend {name!r} lies over the plot of axes {ax.get_title()!r}")
        for text, b in titles + ticks:
            if _overlap(box, b):
                found.append(f"legend {name!r} lies over the text {text!r}")
    return found


def show(fig: Figure, alt: str) -> None:
    """Display ``fig`` as a PNG with alt text ``alt``, warn on what :func:`overlaps` finds,
    and close the figure."""
    from IPython.display import Image, display

    if not alt.strip():
        raise ValueError("show: say what the figure shows (alt text)")
    found = overlaps(fig)
    if found:
        warnings.warn(f"figure {alt[:60]!r}: " + "; ".join(found[:5])
                      + (f" (+{len(found) - 5} more)" if len(found) > 5 else ""),
                      FigureOverlapWarning, stacklevel=2)
    data = png(fig)
    plt.close(fig)
    display(Image(data=data, format="png", alt=alt))


def png(fig: Figure) -> bytes:
    """``fig`` as PNG bytes, cropped to what it draws (a legend outside the axes kept whole)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def frame_html(df: pd.DataFrame) -> str:
    """``df`` as HTML: at most ``display.max_rows`` rows, every column, whole texts, missing
    values as :data:`MISSING`."""
    out = df.copy()
    for i, dtype in enumerate(df.dtypes):  # pandas writes None as "None" whatever na_rep says
        if dtype.kind == "O":
            col = df.iloc[:, i]
            out.isetitem(i, col.where(col.notna(), np.nan))
    with pd.option_context("display.max_colwidth", None):
        return out.to_html(na_rep=MISSING, max_rows=pd.get_option("display.max_rows"),
                          max_cols=None, notebook=True)


def readable_tables() -> None:
    """Display every DataFrame of this IPython kernel as :func:`frame_html`."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, frame_html)
