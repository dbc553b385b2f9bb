"""The example pages (one SAF answer / one ArgSciChat message pair through every system) and
the runs overview, on synthetic run folders."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from test_reporting import check_page
from test_sharing import PAYLOADS, absolute_prefixes, unsafe_markup

from saf_utils import artifacts as AR
from saf_utils.argscichat.data import load_argscichat
from saf_utils.reporting import cli, examples, overview
from saf_utils.reporting.manifest import Manifest
from saf_utils.reporting.records import Recorder
from saf_utils.reporting.run_folder import write_reports

FIX = Path(__file__).parent / "fixtures"
# the notebooks whose output folders hold the artifacts (the pages find them by file)
SAF_NB, SELECTION_NB, GENERATION_NB = "02_baseline_finetuning", "03_fact_selection", "04_generation"


def _saf(run: Path) -> None:
    rec = Recorder(SAF_NB, run / SAF_NB)
    rows, items = [], []
    for system, role, labels in (("majority", "baseline", ["Correct", "Correct"]),
                                 ("feature_clf", "system", ["Correct", "Incorrect"])):
        for seed in ([1, 2] if system == "feature_clf" else [None]):
            for k, label in enumerate(labels):
                ex = f"a{k}"
                rows.append({"id": ex, "split": "test_unseen_answers", "question": f"Q{k}?",
                             "provided_answer": f"answer <{k}>", "reference_answer": f"ref {k}",
                             "gold_label": "Correct", "gold_score": 1.0,
                             "gold_feedback": f"gold feedback {k}", "system": system,
                             "seed": seed, "pred_label": label if seed != 2 else "Incorrect",
                             "pred_score": 1.0,
                             "pred_feedback": f"{system} says {k}/{seed} {PAYLOADS[k]}",
                             "parseable": True})
                items.append({"task": "saf", "dataset": "toy", "split": "test_unseen_answers",
                              "system": system, "metric": "accuracy", "item": ex,
                              "cluster": f"Q{k}?", "value": float(label == "Correct"),
                              "seed": seed, "fold": None})
        rec.add("saf", "toy", "test_unseen_answers", system, "accuracy", 0.5, role=role)
    rec.add_items(pd.DataFrame(items))
    rec.close()
    AR.write_saf_predictions(pd.DataFrame(rows), run / SAF_NB)


def _argscichat(run: Path) -> list:
    pairs = load_argscichat(FIX / "argscichat", fold=0).test[:2]
    rec = Recorder(SELECTION_NB, run / SELECTION_NB)
    sel, items = [], []
    for system, role, picks in (("first", "baseline", [0, 1]), ("bm25", "baseline", [1, 2])):
        for p in pairs:
            sel.append({"fold": 0, "split": "test", "pair_id": p.pair_id, "system": system,
                        "role": role, "seed": None, "selected": picks,
                        "selected_sentences": [p.content[i] for i in picks],
                        "gold": list(p.fact_indexes), "fact_f1": 0.5})
            items.append({"task": "argscichat_fact_selection", "dataset": "argscichat",
                          "split": "test", "system": system, "metric": "fact_f1",
                          "item": p.pair_id, "cluster": p.paper_id, "value": 0.5, "seed": None,
                          "fold": 0})
        rec.add("argscichat_fact_selection", "argscichat", "test", system, "fact_f1", 0.5,
                role=role, fold=0)
    rec.add("argscichat_fact_selection", "argscichat", "val", "bm25", "fact_f1", 0.6,
            kind="tuning", subset="chosen", role="baseline", fold=0)
    rec.add_items(pd.DataFrame(items))
    rec.close()
    AR.write_selections(sel, run / SELECTION_NB)
    gen = Recorder(GENERATION_NB, run / GENERATION_NB)
    gens = [{"fold": 0, "split": "test", "pair_id": p.pair_id, "paper_id": p.paper_id,
             "system": "copy_selected", "role": "baseline", "seed": None,
             "output": f"reply to <{p.query[:10]}>", "gold": p.reply} for p in pairs]
    gen.add_items(pd.DataFrame([{"task": "argscichat_generation", "dataset": "argscichat",
                                 "split": "test", "system": "copy_selected",
                                 "metric": "content_f1", "item": p.pair_id,
                                 "cluster": p.paper_id, "value": 0.25, "seed": None, "fold": 0}
                                for p in pairs]))
    gen.close()
    AR.write_generations(pd.DataFrame(gens), run / GENERATION_NB)
    return pairs


def _run(root: Path, name: str, with_data: bool = True) -> tuple[Path, list]:
    run = root / name
    _saf(run)
    pairs = _argscichat(run)
    folder = FIX / "argscichat" if with_data else root / "moved-away"
    for nb in (SAF_NB, SELECTION_NB, GENERATION_NB):  # data read
        (run / nb / "data_sources.json").write_text(json.dumps([{
            "dataset": "argscichat", "source": str(folder), "split": "fold0/test",
            "path": str(folder / "fold_0_test.json"), "sha256": "x"}]))
    manifest = {"run": name, "profile": "toy", "status": "ok", "git": {"commit": "b" * 40},
                "started": "2026-01-01T00:00:00+00:00", "finished": "2026-01-01T00:01:00+00:00",
                "notebooks": [{"name": n, "status": "ok", "parameters": {}} for n in
                              (SAF_NB, SELECTION_NB, GENERATION_NB)]}
    write_reports(run, Manifest.from_dict(manifest))
    return run, pairs


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("reports"), "toy")


def _detail(text: str, anchor: str) -> str:
    start = text.index(f'id="{anchor}"')
    return text[start:text.index('<div class="example"', start + 1)
                if '<div class="example"' in text[start + 1:] else len(text)]


def test_saf_example_page_follows_one_answer_through_every_system(toy_run):
    run, _ = toy_run
    page = run / examples.SAF_PAGE
    parsed = check_page(page)
    text = page.read_text()
    assert 'href="examples-saf.html"' in (run / "index.html").read_text()
    # the list: one row per answer, linking its detail view; texts escaped
    a1 = examples.anchor("saf", "test_unseen_answers", "a1")
    assert f'href="#{a1}"' in text and "answer &lt;1&gt;" in text
    rows = {r[1]: r for r in parsed.rows if len(r) == 7}
    assert rows["a0"][-1] == "2/2" and rows["a1"][-1] == "1/2"  # systems with the gold label
    detail = _detail(text, a1)
    for words in ("Q1?", "ref 1", "answer &lt;1&gt;", "gold feedback 1", "majority says 1",
                  "feature_clf says 1/1"):
        assert words in detail
    assert "feature_clf says 1/2" not in detail  # seeded systems: the first seed
    assert "✗ Incorrect" in detail and "✓ Correct" in detail
    assert "accuracy" in detail and "↑ 0–1" in detail  # per-item score with its scale
    assert not unsafe_markup(text) and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert not absolute_prefixes(text, [str(run.parent), str(FIX)])  # no local path


def test_argscichat_example_page_shows_history_facts_selections_and_replies(toy_run):
    run, pairs = toy_run
    page = run / examples.ARGSCICHAT_PAGE
    check_page(page)
    text = page.read_text()
    p = pairs[1]
    a = examples.anchor("argscichat", "f0", p.pair_id)
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", a) and f'href="#{a}"' in text
    detail = _detail(text, a)
    from saf_utils.reporting.sharing import esc

    assert esc(p.query) in detail and esc(p.reply) in detail
    assert all(esc(h) in detail for h in p.history)
    assert all(esc(p.content[i]) in detail for i in p.fact_indexes)  # gold facts
    assert "bm25 ★" in detail and "first" in detail and esc(p.content[2]) in detail
    assert "copy_selected" in detail and "reply to &lt;" in detail
    assert "content_f1" in detail and "fact_f1" in detail
    assert not unsafe_markup(text) and not absolute_prefixes(text, [str(run.parent), str(FIX)])


@pytest.mark.slow
def test_argscichat_examples_say_when_the_data_folder_is_gone(tmp_path):
    run, pairs = _run(tmp_path, "nodata", with_data=False)
    text = (run / examples.ARGSCICHAT_PAGE).read_text()
    assert "not on this machine" in text
    assert "reply to &lt;" in text  # what the run's own files hold is still shown


def test_example_pages_are_skipped_without_their_inputs(tmp_path):
    run = tmp_path / "empty"
    run.mkdir()
    assert examples.write_example_pages(run, {}, []) == []
    assert examples.example_pages(run) == []


@pytest.mark.slow
def test_runs_overview_lists_every_run_with_headlines_and_a_chart(tmp_path, capsys):
    root = tmp_path / "reports"
    _run(root, "r1")
    _run(root, "r2")
    (root / "broken").mkdir()
    (root / "broken" / "manifest.json").write_text("{not json")
    assert cli.main(["list", "--reports-dir", str(root), "--html"]) == 0
    page = root / overview.PAGE
    parsed = check_page(page)
    text = page.read_text()
    assert "HTML:" in capsys.readouterr().err
    assert parsed is not None
    from saf_utils.reporting.tables import read_page_tables

    tables = {re.findall(r"<th[^>]*>(.*?)</th>", s["dt_args"]["table_html"])[7]: s
              for s in read_page_tables(text).values()}  # interactive: one per group
    spec = tables["SAF (short answer feedback): accuracy"]
    head = re.findall(r"<th[^>]*>(.*?)</th>", spec["dt_args"]["table_html"])
    assert head[:7] == ["run", "compare", "started", "status", "commit", "duration (s)",
                        "notebooks"]
    assert [r[0] for r in spec["data"]] == ['<a href="r1/index.html">r1</a>',
                                            '<a href="r2/index.html">r2</a>']
    assert "unreadable" in text  # the broken run is named, not dropped silently
    assert '<img alt="headline metrics over the runs' in text  # the chart of a group
    assert spec["data"][0][7] == "0.5" and spec["data"][0][8].startswith("feature_clf")


def test_example_pages_show_what_their_inputs_hold_now(toy_run):
    run, _ = toy_run
    manifest = json.loads((run / "manifest.json").read_text())
    page = run / examples.SAF_PAGE
    preds = run / SAF_NB / "predictions_test_unseen_answers.jsonl.gz"
    AR.write_jsonl([json.loads(line) for line in AR.read_text(preds).replace(
        "gold feedback 1", "new gold feedback 1").splitlines()], preds)
    examples.write_example_pages(run, manifest, [])
    assert "new gold feedback 1" in page.read_text()


def test_example_pages_are_split_into_pages_of_at_most_per_page(tmp_path, monkeypatch):
    """More examples than a page holds: further pages, each linked from the others; the
    navigation bar links the first page only; pages of an earlier, larger run are removed."""
    monkeypatch.setattr(examples, "PER_PAGE", 1)
    run, _ = _run(tmp_path, "paged")
    first, second = run / examples.SAF_PAGE, run / "examples-saf-2.html"
    assert first.is_file() and second.is_file() and not (run / "examples-saf-3.html").exists()
    text = second.read_text()
    assert "(page 2 of 2)" in text and 'href="examples-saf.html"' in text
    assert 'id="saf-test_unseen_answers-a1"' in text and "saf-test_unseen_answers-a0" not in text
    nav = re.search(r'<nav class="saf-nav".*?</nav>', (run / "index.html").read_text(), re.S)
    assert nav and "examples-saf-2.html" not in nav.group(0)
    nav = re.search(r'<nav class="saf-nav".*?</nav>', text, re.S)  # page 2: "saf" is here
    assert nav and re.search(r'<span class="here"[^>]*>saf</span>', nav.group(0))
    (run / "examples-saf-7.html").write_text("stale")
    monkeypatch.setattr(examples, "PER_PAGE", 100)
    manifest = json.loads((run / "manifest.json").read_text())
    examples.write_example_pages(run, manifest, [])
    assert not second.exists() and not (run / "examples-saf-7.html").exists()
    assert "(page" not in first.read_text()


@pytest.mark.slow
def test_example_pages_do_not_grow_with_the_data():
    """At ten times the answers the largest example page is as large as before (one page
    of every answer grew tenfold), and under 1.5 MB."""
    from benchmarks.example_pages_bench import measure
    from saf_utils.reporting.examples import PER_PAGE

    one, ten = measure(150, 5), measure(1500, 5)
    assert ten["pages"] == -(-1500 // PER_PAGE) and ten["total_bytes"] > 9 * one["total_bytes"]
    assert ten["largest_bytes"] <= 1.05 * one["largest_bytes"] < 1.5e6, (one, ten)
