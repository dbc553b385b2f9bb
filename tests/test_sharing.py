"""Pages you can share: nothing from the data renders as markup, no absolute local path."""

from __future__ import annotations

import json
import os
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from notebook_reports import index_page, pages, results_page
from notebook_reports.sharing import PathScrubber, clean_html, md
from tests.page_helpers import read_page_tables

ROOT = Path(__file__).resolve().parent.parent
PAYLOADS = (
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "<svg onload=alert(1)>",
    '<a href="javascript:alert(1)">click</a>',
    "<iframe src=//example.invalid/x></iframe>",
    "[link](javascript:alert(1))",
    "![img](http://example.invalid/x.png)",
    "**bold** `code` | a | b |",
)
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5E"
       "rkJggg==")


class _Markup(HTMLParser):
    """Live markup of a page: tags with their attributes, and script contents."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        self._in_script = tag == "script"
        if tag == "script":
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data


def unsafe_markup(text: str) -> list[str]:
    """Tags, handlers and URLs that the data could have injected into a page."""
    p = _Markup()
    p.feed(text)
    bad = [f"<{t} {k}=…>" for t, a in p.tags for k in a if k.startswith("on")]
    bad += [f"<{t}>" for t, _ in p.tags if t in ("svg", "iframe", "object", "embed", "math")]
    bad += [f"<img src={a.get('src', '')[:40]}>" for t, a in p.tags
            if t == "img" and not a.get("src", "").startswith("data:image/")]
    bad += [f"<{t} href={a['href'][:40]}>" for t, a in p.tags
            if a.get("href", "").strip().lower().startswith(("javascript:", "data:"))]
    # a script's code, not its string literals (an interactive table's escaped data)
    bad += ["<script>alert" for s in p.scripts
            if "alert(" in re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', s)]
    bad += [x for x in PAYLOADS[:5] if x in text]
    return bad


def absolute_prefixes(text: str, prefixes: list[str]) -> list[str]:
    """The prefixes found in ``text`` outside embedded data: URIs."""
    text = re.sub(r"data:[a-z]+/[-+.\w]+;base64,[A-Za-z0-9+/=\s]+", "", text)
    return [p for p in prefixes if p in text]


def _prefixes(*extra: Path) -> list[str]:
    found = {str(ROOT), str(Path.home()), sys.prefix, os.path.realpath(sys.prefix),
             *map(str, extra), *(os.path.realpath(e) for e in extra)}
    return sorted(p for p in found if len(p) > 1)


# ------------------------------------------------------------------ escaping helpers
@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("code", [False, True])
def test_md_renders_payloads_as_text(payload, code):
    from nbconvert.filters import markdown2html

    rendered = markdown2html(f"- **{md(payload, code=code)}** and *more*")
    tags = {t for t, _ in _parse(rendered).tags}
    assert tags <= {"ul", "li", "strong", "em", "code", "p"}, rendered
    assert not unsafe_markup(rendered)


def _parse(text: str) -> _Markup:
    p = _Markup()
    p.feed(text)
    return p


def test_md_keeps_plain_text_readable():
    from nbconvert.filters import markdown2html

    assert "Frage 1: Wie, bitte?" in markdown2html(md("Frage 1:\nWie, bitte?"))
    assert md(None) == "" and md("a`b", code=True) == "`` a`b ``"


def test_clean_html_keeps_tables_and_images_and_drops_active_content():
    import pandas as pd

    frame = pd.DataFrame({"answer": [PAYLOADS[0]], "n": [1]})._repr_html_()
    raw = (frame + f'<img src="data:image/png;base64,{PNG}" onerror="x()">'
           + "".join(PAYLOADS) + '<a href="01_data.html#top">ok</a>')
    out = clean_html(raw)
    assert not unsafe_markup(out)
    assert "<table" in out and "<thead>" in out and "<th>answer</th>" in out
    assert f'src="data:image/png;base64,{PNG}"' in out and 'href="01_data.html#top"' in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out  # shown, not run
    assert "<style" not in out and "scoped" not in out


# ------------------------------------------------------------------ paths
def test_path_scrubber_names_known_prefixes_and_hides_other_absolute_paths(tmp_path):
    run_dir = tmp_path / "reports" / "run1"
    scrub = PathScrubber(run_dir, {"saf_source": "/srv/data/saf", "output_dir":
                                           str(run_dir / "02")})
    text = (f'output_dir = "{run_dir}/02_x"\n'
            f"{sys.prefix}/lib/python3.11/site-packages/sklearn/base.py:12: UserWarning\n"
            f"/usr/lib/python3/dist-packages/numpy/core.py:3 read /srv/data/saf/train.parquet "
            f"from {ROOT}/notebooks and {Path.home()}/x, /opt/secret/file.txt; and/or "
            f"https://example.org/a/b data:image/png;base64,/9j/abc/def {run_dir}-2/x")
    out = scrub(text)
    assert 'output_dir = "$RUN/02_x"' in out
    assert "sklearn/base.py:12" in out and "numpy/core.py:3" in out
    assert "$saf_source/train.parquet" in out and "$PROJECT/notebooks" in out
    assert "…/file.txt" in out and "and/or https://example.org/a/b" in out
    assert "base64,/9j/abc/def" in out
    assert not absolute_prefixes(out, _prefixes(tmp_path) + ["/srv", "/opt", "/usr"])


# ------------------------------------------------------------------ notebook pages
def _payload_notebook(path: Path, run_dir: Path) -> None:
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell(f'output_dir = "{run_dir / path.stem}"\nprint(output_dir)')
    code.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text=(
            f"{sys.prefix}/lib/python3.11/site-packages/pkg/mod.py:1: Warning: x\n"
            f"/tmp/ipykernel_123/456.py:2: Warning\n{run_dir}/02/predictions.jsonl\n")),
        nbformat.v4.new_output("display_data", data={
            "text/html": "".join(PAYLOADS) + f"<p>{run_dir}/x.jsonl</p>",
            "text/markdown": "".join(PAYLOADS), "text/plain": "x",
            "application/javascript": "alert(1)"}),
        nbformat.v4.new_output("display_data", data={"image/png": PNG, "text/plain": "fig"}),
        nbformat.v4.new_output("display_data", data={"application/javascript": "alert(1)"}),
        nbformat.v4.new_output("display_data", data={"text/markdown": "".join(PAYLOADS)}),
        nbformat.v4.new_output("error", ename="E", evalue=str(ROOT),
                               traceback=[f"File {ROOT}/saf_utils/x.py:1 <svg onload=alert(1)>"]),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("# Title\n\nSee [the README](../README.md)."),
                code]
    nb.metadata["papermill"] = {"parameters": {"saf_source": "/srv/data/saf",
                                               "output_dir": str(run_dir / path.stem)}}
    nbformat.write(nb, path)


@pytest.mark.parametrize("hide_code", [False, True])
def test_render_notebook_sanitises_outputs_and_hides_paths(tmp_path, hide_code):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    ipynb = run_dir / "05_x.ipynb"
    _payload_notebook(ipynb, run_dir)
    text = pages.render_notebook(ipynb, hide_code=hide_code).read_text(encoding="utf-8")
    assert not unsafe_markup(text)
    assert not absolute_prefixes(text, _prefixes(tmp_path) + ["/srv/data", "/tmp/ipykernel"])
    assert f"data:image/png;base64,{PNG}" in text and "pkg/mod.py:1" in text
    assert "$RUN/02/predictions.jsonl" in text and 'href="../README.md"' in text
    assert ("output_dir" in text) is not hide_code


# ------------------------------------------------------------------ runner pages
def _manifest(tmp_path: Path) -> dict:
    return {
        "run": "r1", "profile": "smoke", "status": "failed", "git": {"commit": "abc"},
        "started": "t0", "description": "<b>desc</b>",
        "notebooks": [{"name": "02_x", "status": "failed", "html": "02_x.html",
                       "error": f"FileNotFoundError: {tmp_path}/r1/02_x/p.jsonl <script>x"}],
        "data_sources": [
            {"dataset": "saf", "split": "test_unseen_answers", "path": f"{tmp_path}/d/tua.pq",
             "sha256": "a" * 64, "rows": 5, "anomalies": {"leak_answer_in_train": 3,
                                                            "empty_answer": 0}},
            {"dataset": "saf", "split": "test_unseen_questions", "sha256": "b" * 64,
             "path": f"{tmp_path}/d/tuq.pq", "anomalies": {"leak_x": 0}},
            {"dataset": "argscichat", "split": "fold0/test", "path": f"{tmp_path}/f0.json",
             "sha256": "c" * 64, "anomalies": {"leak_paper_in_train": 1}},
        ]}


def _records() -> list[dict]:
    rows = []
    for task, split, metric in (("saf", "test_unseen_answers", "accuracy"),
                                ("saf", "test_unseen_questions", "accuracy"),
                                ("argscichat_fact_selection", "test", "fact_f1")):
        for system, v in (("majority", 0.5), (PAYLOADS[0], 0.7)):
            rows.append({"notebook": "02_x", "task": task, "dataset": "ds", "split": split,
                         "system": system, "metric": metric, "value": v, "kind": "result",
                         "role": "baseline", "subset": PAYLOADS[1]})
            rows.append({**rows[-1], "subset": None})
    return rows


def test_index_warns_of_leakage_beside_the_split_and_shows_no_paths(tmp_path):
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    text = index_page.write_index(run_dir, _manifest(tmp_path), _records()).read_text()
    assert not unsafe_markup(text)
    assert not absolute_prefixes(text, _prefixes(tmp_path))
    sections = re.split(r"<h3[^>]*>", text)
    tua = next(s for s in sections if s.startswith("test_unseen_answers"))
    tuq = next(s for s in sections if s.startswith("test_unseen_questions"))
    arg = next(s for s in sections if s.startswith("test <small>"))
    assert "leak_answer_in_train 3" in tua and "Leakage" not in tuq
    assert "leak_paper_in_train 1" in arg and "f0.json" in arg
    assert "a" * 16 in text and "tua.pq" in text and "$RUN/02_x/p.jsonl" in text


def test_results_page_keeps_its_script_and_escapes_records(tmp_path):
    run_dir = tmp_path / "r1"
    run_dir.mkdir()
    text = results_page.write_results(run_dir, _manifest(tmp_path), _records()).read_text()
    assert "new ITable(" in text and not unsafe_markup(text)
    rows = read_page_tables(text)["results"]["data"]
    cells = {c for r in rows for c in r if isinstance(c, str)}
    assert "0.7" in {r[5] for r in rows}  # the value column (numbers as text)
    assert not any(p in c for p in PAYLOADS[:5] for c in cells)  # escaped for DataTables
    assert "&lt;img src=x onerror=alert(1)&gt;" in cells


# ------------------------------------------------------------------ a whole smoke run
def _payload_saf(src: Path, dst: Path) -> None:
    """A copy of a SAF folder with payloads in every text column and an error_class."""
    import pandas as pd

    (dst / "data").mkdir(parents=True)
    for f in sorted((src / "data").glob("*.parquet")):
        df = pd.read_parquet(f)
        for col in df.columns:  # the labels must stay valid labels
            if col != "verification_feedback" and pd.api.types.is_string_dtype(df[col]):
                df[col] = [f"{v} {PAYLOADS[i % len(PAYLOADS)]}" for i, v in enumerate(df[col])]
        df["error_class"] = [PAYLOADS[i % len(PAYLOADS)] for i in range(len(df))]
        df.to_parquet(dst / "data" / f.name, index=False)


@pytest.mark.slow
@pytest.mark.skipif(not (os.environ.get("SAF_DATA") and os.environ.get("ARGSCICHAT_DATA")),
                    reason="needs SAF_DATA and ARGSCICHAT_DATA")
def test_smoke_run_on_payload_data_shares_safely(tmp_path, monkeypatch):
    from notebook_reports import cli
    from notebook_reports.compare import compare_runs
    from notebook_reports.compare_page import write_compare_html

    _payload_saf(Path(os.environ["SAF_DATA"]), tmp_path / "saf")
    monkeypatch.setenv("SAF_DATA", str(tmp_path / "saf"))
    code = cli.main(["--profile", "smoke", "--reports-dir", str(tmp_path / "reports"),
                     "--run-name", "p"])
    out = tmp_path / "reports" / "p"
    manifest = json.loads((out / "manifest.json").read_text())
    failed = [f"{n['name']}: {n['error']}" for n in manifest["notebooks"] if n["status"] != "ok"]
    assert code == 0 and not failed, failed
    write_compare_html(compare_runs(out, out), out / "compare.html")
    prefixes = _prefixes(tmp_path, Path(os.environ["ARGSCICHAT_DATA"]).resolve())
    checked = 0
    for hide_code in (manifest["hide_code"], not manifest["hide_code"]):
        if hide_code != manifest["hide_code"]:  # the other kind of notebook page
            for nb in out.glob("0*.ipynb"):
                pages.render_notebook(nb, hide_code=hide_code)
        for page in sorted(out.glob("*.html")):
            text = page.read_text(encoding="utf-8")
            assert not unsafe_markup(text), (page.name, hide_code, unsafe_markup(text)[:5])
            assert not absolute_prefixes(text, prefixes), (page.name, hide_code)
            checked += 1
    assert checked >= 2 * 9  # 6 notebooks, index, results, compare
    assert "&lt;img src=x onerror=alert(1)&gt;" in (out / "05_saf_error_analysis.html"
                                                   ).read_text(encoding="utf-8")
