"""Report pages and run comparison on synthetic run folders (no kernel is started)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from notebook_reports import cli, pages
from notebook_reports.compare import compare_runs
from notebook_reports.compare_page import to_markdown, write_compare_html
from notebook_reports.manifest import Manifest
from notebook_reports.records import Recorder
from notebook_reports.run_folder import write_reports
from saf_utils.data.artifacts import record_rows
from tests.page_helpers import external_resources, read_page_tables

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class StrictHTML(HTMLParser):
    """Every non-void tag closed in order; collects table rows and external resources."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.external: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:  # a resource the page would load (a link to a source is none)
            if (k == "src" or (k == "href" and tag == "link")) and v \
                    and re.match(r"\s*(https?:)?//", v):
                self.external.append(v)
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []
        if tag not in VOID:
            self.stack.append(tag)

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]} at {self.getpos()}")
            return
        self.stack.pop()
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None


def check_page(path: Path) -> StrictHTML:
    text = path.read_text(encoding="utf-8")
    parser = StrictHTML()
    parser.feed(text)
    parser.close()
    assert not parser.errors, parser.errors[:5]
    assert not parser.stack, f"unclosed {parser.stack}"
    assert not parser.external and not external_resources(text), parser.external
    assert "<script src" not in text
    return parser


def _items(rng, n_items, n_clusters, mean, **keys):
    return pd.DataFrame({**keys, "item": [f"i{k}" for k in range(n_items)],
                         "cluster": [f"q{k % n_clusters}" for k in range(n_items)],
                         "value": (rng.random(n_items) < mean).astype(float), "seed": None,
                         "fold": None})


def make_run(root: Path, name: str, param: int = 1, shift: float = 0.0,
             extra: bool = False) -> Path:
    """A run folder as the runner leaves it, with records written through the Recorder."""
    run = root / name
    saf = Recorder("02_baseline_finetuning", run / "02_baseline_finetuning")
    for split in ("test_unseen_answers", "test_unseen_questions"):
        for system, role, acc in (("feature_clf", "system", 0.80), ("constant_frequent",
                                  "baseline", 0.40), ("gold_feedback", "oracle", 1.0)):
            a = acc + (shift if system == "feature_clf" else 0.0)
            for metric, v in (("accuracy", a), ("macro_f1", a - 0.05), ("sacrebleu", 40 * a)):
                saf.add("saf", "saf_micro", split, system, metric, v, role=role,
                        ci_low=v - 0.02, ci_high=v + 0.02, method="bootstrap",
                        estimand="new answers to these questions")
            saf.add("saf", "saf_micro", split, system, "accuracy", a, seed=1, role=role)
            saf.add("saf", "saf_micro", split, system, "accuracy", a, kind="analysis",
                    subset="q1")
            if system == "feature_clf":
                saf.add("saf", "saf_micro", split, system, "accuracy", 0.4 + shift,
                        kind="analysis", subset="minus constant_frequent", role=role,
                        ci_low=0.3, ci_high=0.5)
                saf.add("saf", "saf_micro", split, system, "accuracy", 0.002, kind="analysis",
                        subset="p vs constant_frequent", role=role)
                saf.add("saf", "saf_micro", split, system, "accuracy", 0.002, kind="analysis",
                        subset="primary p vs constant_frequent", role=role)
            items = _items(np.random.default_rng(1), 60, 12, min(a, 1.0), task="saf",
                           dataset="saf_micro", split=split, system=system, metric="accuracy")
            saf.add_items(items)
    saf.add("saf", "saf_micro", "validation", "feature_clf", "macro_f1", 0.7, kind="tuning",
            subset="chosen", role="system")
    saf.add("saf", "saf_micro", "validation", "feature_clf", "macro_f1", 0.6, kind="tuning",
            subset="C=0.1")
    saf.close()
    acs = Recorder("03_fact_selection", run / "03_fact_selection")
    for fold in (0, 1):
        for system, role, v in (("bm25", "baseline", 0.2), ("ensemble_bm25", "system", 0.25),
                                ("gold_facts", "oracle", 1.0)):
            acs.add("argscichat_fact_selection", "argscichat", "test", system, "fact_f1",
                    v + 0.01 * fold, fold=fold, role=role)
    if extra:
        acs.add("argscichat_fact_selection", "argscichat", "test", "new_system", "fact_f1",
                0.3, role="system")
    acs.add("argscichat_fact_selection", "argscichat", "val", "ensemble_bm25", "fact_f1",
            0.22, kind="tuning", subset="chosen", role="system")
    acs.close()
    gen = Recorder("04_generation", run / "04_generation")
    for system, role, v in (("seq2seq", "system", 0.15), ("copy_selected", "baseline", 0.18),
                            ("compressed_selected", "probe", 0.3)):
        for metric in ("message_f1", "content_f1", "bertscore_f1"):
            gen.add("argscichat_generation", "argscichat", "test", system, metric, v, role=role,
                    ci_low=v - 0.01, ci_high=v + 0.01)
    gen.close()
    git = {"commit": "a" * 40, "dirty": False}
    manifest = {
        "run": name, "profile": "toy", "status": "ok", "started": "2026-01-01T00:00:00+00:00",
        "finished": "2026-01-01T00:10:00+00:00", "git": git,
        "installed": ["numpy==1.0", "pandas==2.0"] + (["extra-pkg==1.0"] if extra else []),
        "notebooks": [
            {"name": "02_baseline_finetuning", "status": "ok", "seconds": 61.0,
             "started": "2026-01-01T00:00:00+00:00", "html": "02_baseline_finetuning.html",
             "parameters": {"max_steps": param, "output_dir": str(run)}},
            {"name": "03_fact_selection", "status": "ok", "seconds": 3.2,
             "parameters": {"folds": [0, 1]}},
            {"name": "04_generation", "status": "failed", "seconds": 5.0,
             "error": "ValueError: <boom>", "parameters": {}},
        ],
    }
    write_reports(run, Manifest.from_dict(manifest))
    return run


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("reports")
    return root, make_run(root, "run_a"), make_run(root, "run_b", param=7, shift=0.15,
                                                   extra=True)


def test_index_is_a_headline_page(two_runs):
    _, run_a, _ = two_runs
    parsed = check_page(run_a / "index.html")
    text = (run_a / "index.html").read_text()
    rows = {r[0]: r for r in parsed.rows if r}
    # above the fold: run, profile, commit, notebook status and time
    assert "Run run_a" in text and "<b>toy</b>" in text and "aaaaaaaaaaaa" in text
    assert rows["02_baseline_finetuning"][1:3] == ["ok", "1:01"]
    assert rows["04_generation"][1] == "failed" and "&lt;boom&gt;" in text
    # SAF: one table per test split, systems x (accuracy, macro_f1, sacrebleu), 3 significant digits
    plain = re.sub(r"</?a\b[^>]*>", "", text)  # metric names in headers link to their cards
    assert len(re.findall(r">accuracy <small[^>]*>↑ 0–1</small></th><th[^>]*>macro_f1 <small"
                          r"[^>]*>↑ 0–1</small></th><th[^>]*>sacrebleu <small[^>]*>↑ 0–100",
                          plain)) == 2
    assert text.count('<a class="saf-metric" href="metric-cards.html#accuracy"') == 2
    assert rows["feature_clf ★ val-chosen"][1:] == ["system", "0.8 [0.78, 0.82]",
                                                     "0.75 [0.73, 0.77]", "32 [32, 32]"]
    assert rows["constant_frequent"][1] == "baseline"
    # ceilings (gold readers, oracles) and probes come after a separator row
    seps = [i for i, r in enumerate(parsed.rows) if r and r[0].startswith("ceilings")]
    assert seps and all(parsed.rows[i + 1][1] in ("gold_input", "oracle", "probe")
                        for i in seps)
    # fact selection: no headline record -> mean over folds, marked; val-chosen marked
    assert rows["ensemble_bm25 ★ val-chosen"][2] == "0.255 (mean of 2*)"
    # generation rows come from a failed notebook: marked
    assert "seq2seq †" in rows and "compressed_selected †" in rows
    assert "<b>feature_clf</b> is best: highest accuracy" in text
    assert "<b>copy_selected</b> is best: highest content_f1" in text
    # the gap to the runner-up is judged by its test (here the primary comparison)
    assert "it is ahead of the runner-up <b>constant_frequent</b> beyond chance" in text
    # generation has no test of its leader's gap: the page says so
    assert "by the point estimate, a gap that was " in text
    assert '#not-tested">not tested</a>' in text
    # the val-chosen system, then the statistics: difference, CI and (primary) p
    assert "It is also the system chosen on validation by macro_f1 (★)." in text
    assert ("feature_clf 0.8 [0.78, 0.82]; difference +0.4 [+0.3, +0.5] vs constant_frequent, "
            "p = 0.002, the primary comparison.") in text
    assert "estimand: new answers to these questions; method: bootstrap" in text
    assert text.count("data:image/png;base64,") == 3  # one figure per task
    # only result records: no tuning grid value, no analysis subset
    words = re.sub(r"data:image/png;base64,[^\"]+", "", text)
    assert "C=0.1" not in words and ">q1<" not in words and "validation <small>" not in words


def test_results_page_holds_every_record_with_a_default_view(two_runs):
    _, run_a, _ = two_runs
    check_page(run_a / "results.html")
    metrics = json.loads((run_a / "metrics.json").read_text())
    text = (run_a / "results.html").read_text()
    spec = read_page_tables(text)["results"]
    thead = spec["dt_args"]["table_html"].split("</thead>")[0]
    head = re.findall(r"<th>(.*?)</th>", thead)
    assert head[:8] == ["system", "split", "metric", "scale", "what", "value", "CI", "p"]
    rows = [dict(zip(head, r, strict=True)) for r in spec["data"]]
    assert len(rows) == len(metrics["records"])  # every kind; the default view filters
    assert sum(r["kind"] == "result" for r in rows) == 39
    assert any(r["notebook_status"] == "failed" for r in rows)
    search = [c and c["search"] for c in spec["dt_args"]["searchCols"]]
    assert search[head.index("kind")] == "result" and search[head.index("split")] == "test"
    # each headline once by default: per-seed and per-fold values say what they are
    assert search[head.index("what")] == "headline"
    heads = [r for r in rows if r["kind"] == "result" and r["what"] == "headline"
             and r["split"].startswith("test")]
    keys = [(r["task"], r["split"], r["system"], r["metric"]) for r in heads]
    assert len(keys) == len(set(keys))
    assert {r["what"] for r in rows if r["seed"] == "1"} == {"per seed 1"}
    # p-values sit in the p column, never in value; differences say so
    pv = [r for r in rows if r["what"].startswith(("p vs", "Holm", "p_adj"))]
    assert pv and all(r["value"] == "" and r["p"] == "0.002" for r in pv)
    assert any(r["what"] == "difference vs constant_frequent" for r in rows)
    assert rows[0]["scale"] in ("↑ 0–1", "↑ 0–100", "↓ ≥ 0", "↑", "↓")
    assert '<body class="wide">' in text  # not capped at the reading width
    assert spec["dt_args"]["column_filters"] == "footer"
    assert "colvis" in json.dumps(spec["dt_args"]["layout"])
    assert 'id="results"' in text and "new ITable(" in text  # the project's own script


def test_compare_names_the_parameter_and_the_changed_records(two_runs, capsys):
    root, run_a, run_b = two_runs
    cmp = compare_runs(run_a, run_b, n_resamples=300)
    assert [(p["notebook"], p["parameter"], p["a"], p["b"]) for p in cmp["parameters"]] == [
        ("02_baseline_finetuning", "max_steps", 1, 7)]
    changed = {(c["split"], c["system"], c["metric"]) for c in cmp["changed"]}
    assert changed == {(s, "feature_clf", m) for s in ("test_unseen_answers",
                                                        "test_unseen_questions")
                       for m in ("accuracy", "macro_f1", "sacrebleu")}
    acc = [c for c in cmp["changed"] if c["metric"] == "accuracy"]
    assert all(c["test"] and "p" in c["test"] for c in acc)  # items of both runs -> paired test
    assert all(c["test"] is None for c in cmp["changed"] if c["metric"] == "sacrebleu")
    assert [r["system"] for r in cmp["appeared"]] == ["new_system"] and not cmp["disappeared"]
    assert cmp["packages"] == [{"package": "extra-pkg", "a": None, "b": "1.0"}]
    md = to_markdown(cmp)
    assert "| 02_baseline_finetuning | max_steps | 1 | 7 |" in md
    assert "new_system" in md and "feature_clf" in md and "constant_frequent" not in md
    out = write_compare_html(cmp, root / "cmp.html")
    parsed = check_page(out)
    assert ["02_baseline_finetuning", "max_steps", "1", "7"] in parsed.rows
    # the CLI: Markdown to stdout, HTML into run B
    assert cli.main(["compare", "run_a", "run_b", "--reports-dir", str(root),
                     "--resamples", "200"]) == 0
    assert "max_steps" in capsys.readouterr().out
    check_page(run_b / "compare-run_a.html")
    assert cli.main(["compare", "run_a", "nope", "--reports-dir", str(root)]) == 2


def test_identical_runs_compare_clean(two_runs):
    root, run_a, _ = two_runs
    cmp = compare_runs(run_a, run_a)
    assert not (cmp["parameters"] or cmp["changed"] or cmp["appeared"] or cmp["packages"])
    assert cmp["unchanged"] > 0


def test_list_shows_runs_and_dead_running_ones(two_runs, tmp_path, capsys):
    root, _, _ = two_runs
    assert cli.main(["list", "--reports-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^toy · \S+\n.*\n\s+run_a\s+aaaaaaaa\s+ok\s+2026-01-01T00:00:00Z\s+10:00\s+"
                     r"2/3 ok", out, re.M), out  # under its profile and dataset
    dead = tmp_path / "dead"
    dead.mkdir()
    (dead / "manifest.json").write_text(json.dumps({
        "run": "dead", "profile": "toy", "status": "running", "pid": 2 ** 22 + 7,
        "host": __import__("socket").gethostname(), "started": "2026-01-01T00:00:00+00:00"}))
    cli.main(["list", "--reports-dir", str(tmp_path)])
    assert re.search(r"^toy · no records\n.*\n\s+dead\s+killed", capsys.readouterr().out, re.M)
    assert json.loads((dead / "manifest.json").read_text())["status"] == "killed"


def test_format_three_significant_digits():
    assert [pages.fmt(x) for x in (0.85234, 48.53, 0.000123456, 3.0, None)] == [
        "0.852", "48.5", "0.000123", "3", ""]


def test_add_frame_records_each_row_nan_as_none_and_fixed_fields(tmp_path):
    rec = Recorder("04_generation", tmp_path)
    frame = pd.DataFrame({"system": ["a", "b"], "metric": ["m", "m"], "value": [0.5, 0.25],
                          "seed": [1.0, float("nan")], "fold": [0, 1], "role": ["system", None],
                          "extra": ["ignored", "ignored"]})
    assert rec.add_frame(frame, "t", "d", split="test", kind="analysis") == 2
    rows = record_rows([rec.path])
    assert [(r["system"], r["seed"], r["fold"], r["role"], r["kind"], r["split"])
            for r in rows] == [("a", 1, 0, "system", "analysis", "test"),
                               ("b", None, 1, None, "analysis", "test")]
    with pytest.raises(ValueError, match="missing column"):
        rec.add_frame(frame.drop(columns="value"), "t", "d", split="test")
    with pytest.raises(ValueError, match="unknown field"):
        rec.add_frame(frame, "t", "d", split="test", colour="red")


def test_add_checks_its_details_by_name_and_value(tmp_path):
    """The optional fields of a record are keywords checked by name (a misspelt one fails),
    converted like a tidy row (seed an int, subset a string, a non-finite interval None)."""
    rec = Recorder("04_generation", tmp_path)
    r = rec.add("t", "d", "test", "s", "m", 0.5, seed=2.0, subset=3, ci_low=float("nan"),
                ci_high=0.75, note="n")
    assert (r.seed, r.subset, r.ci_low, r.ci_high, r.note, r.kind) == (2, "3", None, 0.75,
                                                                       "n", "result")
    assert type(r.seed) is int
    with pytest.raises(TypeError, match="unknown field.*'sede'"):
        rec.add("t", "d", "test", "s", "m", 0.5, sede=1)
    with pytest.raises(ValueError, match="kind 'tunning'"):
        rec.add("t", "d", "test", "s", "m", 0.5, kind="tunning")
    with pytest.raises(ValueError, match="not finite"):
        rec.add("t", "d", "test", "s", "m", float("inf"))
    assert len(record_rows([rec.path])) == 1
