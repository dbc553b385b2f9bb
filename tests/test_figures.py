"""Figures a reader can read: the overlap check, alt text, palettes, frames shown whole."""

from __future__ import annotations

import json
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import seaborn as sns  # noqa: E402
from IPython.core.formatters import DisplayFormatter  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from saf_utils import figures  # noqa: E402
from saf_utils.argscichat.systems import SELECTORS  # noqa: E402

#: 03's thirteen selectors (the longest name has 24 characters).
NAMES = list(SELECTORS.names())
#: 04's val grid of compressed_selected (36 settings).
SETTINGS = [f"prior_words={p},threshold={t}" for p in (0, 50, 200, 500)
            for t in (0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.3)]


def _folds(names: list[str]) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame([{"system": s, "fold": f, "value": rng.uniform(0, 0.6)}
                         for s in names for f in range(5)])


def old_strip_plot() -> plt.Figure:
    """03's test Fact-F1 figure as it was: selectors along x, rotated, legend inside."""
    df = _folds(NAMES)
    fig, ax = plt.subplots(figsize=(11, 4))
    sns.stripplot(data=df, x="system", y="value", order=NAMES, hue="fold", ax=ax,
                  palette="dark:k", size=4, jitter=0.15)
    ax.set_title("Test Fact-F1 (k=2): mean over folds with 95% CI (cluster t); dots: folds")
    ax.tick_params(axis="x", rotation=30)
    plt.tight_layout()
    return fig


def new_strip_plot() -> plt.Figure:
    """The same data as the notebook draws it now: one row per selector, legend outside."""
    df = _folds(NAMES)
    fig, ax = plt.subplots(figsize=(9, 0.38 * len(NAMES) + 1.6))
    sns.stripplot(data=df, y="system", x="value", order=NAMES, hue="fold",
                  palette=figures.palette(5), ax=ax, size=5, jitter=0.15)
    ax.set(title="Test Fact-F1 (k=2) per selector", xlabel="Fact-F1", ylabel="")
    ax.legend(title="dots: fold", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    plt.tight_layout()
    return fig


def old_choice_plot() -> plt.Figure:
    """04's "choices made on val" as it was: settings along x (36), legends inside."""
    t = pd.DataFrame([{"subset": s, "fold": f, "value": (i % 7) / 10 + f / 100}
                      for i, s in enumerate(SETTINGS) for f in range(3)])
    fig, axes = plt.subplots(1, 3, figsize=(16.5, 3.3), squeeze=False)
    for ax in axes[0]:
        sns.lineplot(data=t, x="subset", y="value", hue="fold", marker="o", ax=ax,
                     palette="viridis", sort=False)
        ax.set(title="compressed_selected: val content_f1 per fold", xlabel="")
        ax.tick_params(axis="x", rotation=45)
    plt.tight_layout()
    return fig


def test_overlaps_finds_what_a_reader_cannot_read() -> None:
    strip = figures.overlaps(old_strip_plot())
    assert any("x tick labels" in f for f in strip)
    assert any(f.startswith("legend 'fold' lies over the plot") for f in strip)
    choice = figures.overlaps(old_choice_plot())
    assert sum("x tick labels" in f for f in choice) > 30  # the block of merged settings
    assert any("legend" in f for f in choice)
    fig, axes = plt.subplots(1, 2, figsize=(4, 2))
    for ax in axes:
        ax.set_title("a rather long title that runs into its neighbour's")
    assert any(f.startswith("titles") for f in figures.overlaps(fig))
    plt.close("all")


def test_the_notebooks_layouts_overlap_nowhere() -> None:
    assert figures.overlaps(new_strip_plot()) == []
    fig, ax = plt.subplots(figsize=(9, 0.28 * len(SETTINGS) + 1.3))
    t = pd.DataFrame([{"subset": s, "fold": f, "value": (i % 7) / 10}
                      for i, s in enumerate(SETTINGS) for f in range(3)])
    sns.pointplot(data=t, y="subset", x="value", hue="fold", palette=figures.palette(3),
                  ax=ax, errorbar=None, dodge=0.3, linestyle="none", marker="o")
    ax.legend(title="fold", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    plt.tight_layout()
    assert figures.overlaps(fig) == []
    plt.close("all")


def test_wrapped_tick_labels_sit_side_by_side() -> None:
    splits = ["validation", "test_unseen_questions", "train", "test_unseen_answers"]
    assert figures.wrap_label("test_unseen_questions") == "test_unseen_\nquestions"
    assert figures.wrap_label("Partially correct") == "Partially\ncorrect"
    figs = []
    for wrap in (False, True):  # 01's label shares as they were (rotated 20°), then wrapped
        fig, ax = plt.subplots(figsize=(4.5, 3.5))  # 01: two panels and a legend
        ax.bar(range(4), [0.5, 0.4, 0.3, 0.4])
        ax.set_xticks(range(4), splits)
        if wrap:
            figures.wrap_ticks(ax)
        else:
            ax.tick_params(axis="x", rotation=20)
        plt.tight_layout()
        figs.append(figures.overlaps(fig))
    assert figs[0] and figs[1] == []
    plt.close("all")


def test_palette_colours_can_be_told_apart() -> None:
    def distance(a, b) -> float:
        return float(np.linalg.norm(np.subtract(to_rgb(a), to_rgb(b))))

    def closest(colours) -> float:
        return min(distance(a, b) for i, a in enumerate(colours) for b in colours[i + 1:])

    for n in (3, 10, 13, 22):
        assert len(figures.palette(n)) == n and closest(figures.palette(n)) > 0.11
    assert closest(sns.color_palette(n_colors=13)) < 0.11  # what 06 drew: repeated colours
    assert closest(sns.color_palette("tab20")) < 0.11  # pale twins


def test_show_displays_a_png_with_alt_text_and_warns_on_overlap(monkeypatch) -> None:
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    figures.show(new_strip_plot(), "Fact-F1 per selector")
    data, metadata = DisplayFormatter().format(shown[0])  # what the notebook stores
    assert metadata == {"image/png": {"alt": "Fact-F1 per selector"}}
    assert data["image/png"].startswith("iVBORw0KGgo")  # a base64 PNG
    with pytest.warns(figures.FigureOverlapWarning, match="x tick labels"):
        figures.show(old_strip_plot(), "old layout")
    assert plt.get_fignums() == []  # every shown figure is closed
    with pytest.raises(ValueError, match="alt text"):
        figures.show(new_strip_plot(), " ")
    plt.close("all")


def test_frames_show_whole_with_one_missing_value() -> None:
    df = pd.DataFrame({"params": ["generic_feature_sets={'all': None, " + "x" * 200 + "}", None],
                       "value": [0.5, np.nan], "fold": [None, None],
                       **{f"c{i}": [i, i] for i in range(25)}})
    html = figures.frame_html(df)
    assert "x" * 200 + "}" in html  # no text cut mid-value
    assert "None</td>" not in html and "NaN" not in html and html.count(figures.MISSING) == 4
    assert "c12" in html and "columns" not in html  # every column, no "2 rows x 27 columns"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        figures.readable_tables()  # outside IPython: nothing to register, no error


@pytest.mark.slow
def test_smoke_run_figures_have_alt_text_and_pages_no_log_lines(smoke_run) -> None:
    """Every figure of every notebook of a smoke run was displayed by ``figures.show``: a
    PNG with alt text, no overlap warning; no job log lines in any cell output."""
    run, _ = smoke_run
    n_images = 0
    for path in sorted(run.glob("[0-9]*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            for out in cell.get("outputs", []):
                if "image/png" in out.get("data", {}):
                    n_images += 1
                    alt = out.get("metadata", {}).get("image/png", {}).get("alt", "")
                    assert len(alt) > 20, (path.name, cell["source"][:3])
                text = "".join(out.get("text", ""))
                assert "FigureOverlapWarning" not in text, (path.name, text[:500])
                assert "[train]" not in text, (path.name, text[:200])
    assert n_images >= 8
