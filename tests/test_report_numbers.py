"""Numbers that read right on index.html: intervals inside the metric's range, the method
named as used, the star on the system each split's choice made, scale and direction beside
each metric, plain-words lead sentences."""

from __future__ import annotations

import math
import re
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from notebook_reports import headline, index_page, published
from saf_utils import metrics as MS
from saf_utils.statistics import protocol as P
from saf_utils.taskspec import Published


def _result(system, split, metric, value, role="system", **kw):
    return {"task": "saf", "dataset": "saf_micro_job_german", "split": split, "system": system,
            "metric": metric, "value": value, "role": role, "kind": "result", "seed": None,
            "fold": None, "subset": None, **kw}


def _items(values_by_cluster: dict[str, list[float]], system="A", metric="fact_f1"):
    rows = [{"split": "test", "system": system, "metric": metric, "item": f"{c}-{i}",
             "cluster": c, "value": v}
            for c, vals in values_by_cluster.items() for i, v in enumerate(vals)]
    return pd.DataFrame(rows)


def test_bounds_come_from_the_metric_scale():
    assert MS.bounds("accuracy") == (0.0, 1.0) and MS.bounds("sacrebleu") == (0.0, 100.0)
    assert MS.bounds("mse") == (0.0, math.inf) and MS.bounds("train_loss") is None
    assert MS.bounds("not_registered") is None
    assert MS.scale_label("accuracy") == "↑ 0–1" and MS.scale_label("mse") == "↓ ≥ 0"
    assert MS.scale_label("sacrebleu") == "↑ 0–100" and MS.scale_label("train_loss") == "↓"


def test_a_cluster_t_interval_past_the_range_is_clipped_and_says_so():
    # three papers, one perfect and two near zero: the t interval over 3 clusters is wide
    items = _items({"p1": [1.0, 1.0, 1.0], "p2": [0.0, 0.0, 0.5], "p3": [0.0, 0.0, 0.0]})
    design = P.Design("papers", "cluster", "new papers")
    raw = P.estimate(P.seed_average(items, design), design)
    assert raw["ci_low"] < 0  # what the index showed before ("0.157 [-0.862, 1.18]")
    (row,) = P.headline_table(items, design).itertuples()
    assert raw["ci_high"] > 1
    assert (row.ci_low, row.ci_high) == (0.0, 1.0)
    assert row.mean == pytest.approx(raw["mean"])
    assert row.method.startswith("cluster t (") and P.CLIPPED in row.method
    # an interval inside the range is left as it is, method unmarked
    inside = _items({f"p{k}": [0.4, 0.5, 0.6] for k in range(6)})
    (row,) = P.headline_table(inside, design).itertuples()
    assert P.CLIPPED not in row.method


def test_clip_interval_leaves_unbounded_and_out_of_range_estimates_alone():
    est = {"mean": 0.5, "ci_low": -0.2, "ci_high": 1.3, "method": "m"}
    assert P.clip_interval(est, (0.0, 1.0)) == {
        "mean": 0.5, "ci_low": 0.0, "ci_high": 1.0, "method": f"m; {P.CLIPPED} [0, 1]"}
    assert P.clip_interval(est, None) == est
    wrong_range = {"mean": -0.1, "ci_low": -0.3, "ci_high": 0.1, "method": "m"}
    assert P.clip_interval(wrong_range, (0.0, 1.0)) == wrong_range  # never hides a bad range
    assert P.diff_bounds("accuracy") == (-1.0, 1.0) and P.diff_bounds("mse") is None


@pytest.mark.slow
def test_clipping_never_costs_coverage():
    """The truth lies in the range, so a clipped interval covers it exactly when the raw one
    does: coverage of the clipped t interval equals the raw one on skewed 0/1 clusters."""
    rng = np.random.default_rng(0)
    design = P.Design("papers", "cluster", "new papers")
    raw_hits = clipped_hits = clipped_any = 0
    truth = 0.1
    for _ in range(200):
        p = rng.beta(0.3, 2.7, size=4)  # mean 0.1, very skewed between clusters
        items = _items({f"c{k}": list((rng.random(5) < p[k]).astype(float))
                        for k in range(4)})
        raw = P.estimate(P.seed_average(items, design), design)
        (row,) = P.headline_table(items, design).itertuples()
        if not np.isfinite(raw["ci_low"]):
            continue
        raw_hits += raw["ci_low"] <= truth <= raw["ci_high"]
        clipped_hits += row.ci_low <= truth <= row.ci_high
        clipped_any += P.CLIPPED in row.method
        assert 0.0 <= row.ci_low <= row.ci_high <= 1.0
    assert clipped_any > 20 and raw_hits == clipped_hits


def test_paired_differences_stay_inside_the_range_of_a_difference():
    a = _items({f"c{k}": [1.0] * 3 for k in range(3)}, system="A")
    b = _items({"c0": [0.0] * 3, "c1": [0.0] * 3, "c2": [1.0] * 3}, system="B")
    design = P.Design("papers", "cluster", "new papers")
    (row,) = P.paired_table(pd.concat([a, b]), "B", design).itertuples()
    assert -1.0 <= row.ci_low <= row.ci_high <= 1.0


def test_the_index_clips_old_records_and_marks_them():
    recs = [_result("A", "test_unseen_answers", "accuracy", 0.157, ci_low=-0.862, ci_high=1.18,
                    method="cluster t (2 df)", estimand="new questions"),
            _result("B", "test_unseen_answers", "accuracy", 0.1, role="baseline")]
    html = "\n".join(index_page.task_sections(recs))
    assert "-0.862" not in html and "0.157 <small>[0, 1]" in html and "‡" in html
    assert "clipped to it" in html and "method: cluster t (df 2)" in html


def _choice_records():
    recs = []
    for split, (a, b) in {"test_unseen_answers": (0.8, 0.6),
                          "test_unseen_questions": (0.5, 0.55)}.items():
        recs += [_result("feature_clf", split, "accuracy", a, ci_low=a - 0.1, ci_high=a + 0.1,
                         method="bootstrap of items within clusters", estimand="e"),
                 _result("nearest_neighbour", split, "accuracy", b, role="baseline",
                         ci_low=b - 0.1, ci_high=b + 0.1,
                         method="bootstrap of items within clusters", estimand="e")]
    recs.append({**_result("feature_clf", "validation", "macro_f1", 0.7), "kind": "tuning",
                 "subset": "chosen"})
    recs.append({**_result("nearest_neighbour", "train", "macro_f1", 0.5), "kind": "tuning",
                 "subset": P.chosen_for("test_unseen_questions"),
                 "method": "leave-one-question-out CV on train"})
    # the gap on unseen questions is tested: not distinguishable
    for sub, v in (("minus feature_clf", 0.05), ("p vs feature_clf", 0.62),
                   ("p_adj vs feature_clf", 1.0)):
        recs.append({**_result("nearest_neighbour", "test_unseen_questions", "accuracy", v),
                     "kind": "analysis", "subset": sub,
                     **({"ci_low": -0.2, "ci_high": 0.3} if sub.startswith("minus") else {})})
    return recs


def test_the_star_marks_the_choice_made_for_each_split():
    recs = _choice_records()
    chosen = headline.chosen_by_split(recs, "saf")
    assert headline.chosen_on(chosen, "test_unseen_answers") == {
        "feature_clf": "chosen on validation by macro_f1"}
    assert list(headline.chosen_on(chosen, "test_unseen_questions")) == ["nearest_neighbour"]
    html = "\n".join(index_page.task_sections(recs))
    ua, uq = html.split('id="saf-test_unseen_questions"')
    assert "feature_clf ★" not in re.sub(r"<[^>]+>", "", uq)
    assert re.search(r"nearest_neighbour(</span>)? <span class=\"chosen\"[^>]*>★ chosen on "
                     r"train", uq)
    assert "leave-one-question-out CV on train" in uq
    assert re.search(r"feature_clf(</span>)? <span class=\"chosen\"[^>]*>★ val-chosen", ua)


def test_lead_sentences_say_it_in_plain_words_first():
    html = "\n".join(index_page.task_sections(_choice_records()))
    uq = html.split('id="saf-test_unseen_questions"')[1]
    lead = re.search(r'<p class="lead">(.*?)<br>', uq, re.S).group(1)
    assert lead.startswith("On test, <b>nearest_neighbour</b> is best")
    assert "<b>not distinguishable</b> from the runner-up <b>feature_clf</b> by the " \
           "Holm-adjusted test at this sample size" in lead
    assert ("It is also the system chosen on train by macro_f1 (leave-one-question-out CV on "
            "train) (★). It is the one to report") in lead
    assert "[" not in lead and "p =" not in lead  # the statistics come after, in small print
    stats = re.search(r'<small class="stats">(.*?)</small></p>', uq, re.S).group(1)
    assert "+0.05 [-0.2, +0.3]" in stats and "p = 0.62, Holm-adjusted p = 1.00" in stats
    ua = html.split('id="saf-test_unseen_questions"')[0]
    assert "<b>feature_clf</b> is best" in ua and "(★). It is the one to report" in ua


def _text(html: str) -> str:
    return unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip())


def _selection_records():
    """ArgSciChat fact selection on test: the val-chosen composite, a system that reads
    earlier turns' gold facts and is highest on test, the reference baseline; the primary
    comparison and the test of the gold reader against the chosen system (run that way
    round)."""
    def rec(system, value, role="system", **kw):
        return {**_result(system, "test", "fact_f1", value, role=role, **kw),
                "task": "argscichat_fact_selection", "dataset": "argscichat"}
    recs = [rec("ranker", 0.16, ci_low=0.0, ci_high=0.58, note="reads earlier turns' gold facts"),
            rec("val_chosen", 0.12, ci_low=0.0, ci_high=1.0),
            rec("val_best_baseline", 0.06, role="baseline", ci_low=0.0, ci_high=0.5),
            {**rec("val_chosen", 0.2), "split": "val", "kind": "tuning", "subset": "chosen"}]
    for system, sub, v, ci in (
            ("val_chosen", "minus val_best_baseline", 0.06, (0.0, 0.12)),
            ("val_chosen", "primary p vs val_best_baseline", 0.5, None),
            ("ranker", "minus val_chosen", 0.04, (-0.05, 0.13)),
            ("ranker", "p vs val_chosen", 0.3, None), ("ranker", "p_adj vs val_chosen", 0.9, None)):
        recs.append({**rec(system, v), "kind": "analysis", "subset": sub,
                     **({"ci_low": ci[0], "ci_high": ci[1]} if ci else {})})
    return recs


def test_the_first_screen_names_the_reportable_system_its_verdict_and_the_published_anchors():
    html = index_page.glance_table(_choice_records() + _selection_records())
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.S)[1:]
    ua, uq, sel = (_text(r) for r in rows)
    # the reportable system (★, chosen without test) with its interval, on its metric
    assert ua.startswith("SAF (short answer feedback) test_unseen_answers · "
                         "saf_micro_job_german ★ feature_clf accuracy ↑ 0–1 0.8 [0.7, 0.9]")
    assert "vs the runner-up nearest_neighbour : not tested" in ua
    assert "★ is also the highest on test" in ua
    # the runner-up verdict names its test, Holm-adjusted
    assert "★ nearest_neighbour accuracy ↑ 0–1 0.55 [0.45, 0.65]" in uq
    assert ("not distinguishable from the runner-up feature_clf at this sample size "
            "( difference +0.05 [-0.2, +0.3], Holm-adjusted p = 1.00)") in uq
    # published anchors: the same data first, the legal-domain card marked as other data,
    # percent converted to the page's 0-1 scale (accuracy is the same metric)
    assert "same data : mBART micro-job card 80.1 % = 0.801 ( source )" in ua
    assert ("different data (saf_legal_domain_german) : mBART legal-domain card 81.0 % = "
            "0.810") in ua
    assert ua.index("same data") < ua.index("different data")
    assert "mBART micro-job card 48.7 % = 0.487" in uq
    # ArgSciChat: ★ is the val-chosen composite; the highest on test reads gold inputs and
    # says so; a test run the other way round is turned around; the primary comparison
    assert "★ val_chosen fact_f1 ↑ 0–1 0.12 [0, 1]" in sel
    assert ("not distinguishable from the highest on test ranker 0.16 [0, 0.58] (for "
            "reference only) ⚠ reads earlier turns' gold facts at this sample size "
            "( difference -0.04 [-0.13, +0.05], Holm-adjusted p = 0.90)") in sel
    assert ("not distinguishable from the reference val_best_baseline at this sample size "
            "( difference +0.06 [0, +0.12], p = 0.50, the primary comparison (not "
            "adjusted))") in sel
    assert "same data : First 0.079 (0–1) ; TF-IDF 0.162 (0–1) ; SBERT 0.162 (0–1)" in sel
    assert 'href="https://arxiv.org/abs/2202.06690"' in html
    assert 'href="how-to-read.html#gold-inputs"' in html
    # every row that names the gold reader marks it, in the task section too
    section = "\n".join(index_page.task_sections(_selection_records()))
    assert all("⚠" in _text(r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", section, re.S)
               if re.search(r"\branker\b", _text(r)))
    assert "ranker ⚠ reads earlier turns' gold facts" in _text(section)


def test_a_verdict_never_reads_against_its_interval():
    d = {"ref": "b", "diff": -0.061, "low": -0.096, "high": -0.025, "p": 0.012,
         "p_adj": 0.123, "primary": False}
    text = _text(headline.gap_html(d, "<b>b</b>", "accuracy"))
    assert text.startswith("not distinguishable from b")
    assert ("Holm-adjusted p = 0.12; the interval is not adjusted for the other comparisons "
            "and excludes 0, the Holm-adjusted test does not reach 0.05") in text
    straddles = _text(headline.gap_html({**d, "high": 0.01}, "b", "accuracy"))
    assert "excludes 0" not in straddles
    primary = _text(headline.gap_html({**d, "primary": True}, "b", "accuracy"))
    assert primary.startswith("distinguishable from b: behind beyond chance")
    assert "primary comparison" in primary and "excludes 0" not in primary
    assert "behind" not in _text(headline.gap_html({**d, "primary": True}, "b", "mse"))
    assert _text(headline.gap_html(None, "b", "accuracy")) == "vs b: not tested"
    assert headline.oriented({("a", "b"): d}, "b", "a")["low"] == pytest.approx(0.025)


def test_a_gold_reader_stands_beside_the_star_as_a_ceiling_never_as_the_runner_up():
    recs = [{**r, "role": "gold_input", "note": None} if r["system"] == "ranker" else r
            for r in _selection_records()]
    sel = _text(re.findall(r"<tr>(.*?)</tr>", index_page.glance_table(recs), re.S)[1])
    assert "★ val_chosen" in sel
    assert ("ceiling, not deployable: ranker ⚠ ceiling: reads gold inputs a user would not "
            "have 0.16 [0, 0.58]") in sel
    assert "highest on test ranker" not in sel and "runner-up val_best_baseline" in sel


def test_published_values_say_their_scale_and_convert_only_the_same_metric():
    card = Published("card", "src", "https://x", "ds", "s", "percent",
                     (("accuracy", 81.0), ("bertscore_f1", 55.0)), comparable=("accuracy",))
    assert _text(published.published_value(card, "accuracy", 81.0)) == "81.0 % = 0.810"
    assert "= 0.55" not in published.published_value(card, "bertscore_f1", 55.0)
    bleu = Published("card", "src", "u", "ds", "s", "percent", (("sacrebleu", 0.3),),
                     comparable=("sacrebleu",))
    assert _text(published.published_value(bleu, "sacrebleu", 0.3)) == "0.3 (0–100)"
    assert "computed differently here" in published.published_value(card, "bertscore_f1", 55)
    paper = Published("LED", "paper", "https://y", "ds", "test", "0-1",
                      (("message_f1", None),), unquoted="published in Table 9; not at hand")
    assert _text(published.published_html([paper], "ds", ["content_f1"])) == (
        "same data : LED message_f1: published in Table 9; not at hand ( source )")
    # the published system run here: "reproduced" where equal at the published rounding
    tfidf = Published("TF-IDF", "paper", "u", "ds", "test", "0-1", (("fact_f1", 0.162),),
                      comparable=("fact_f1",), measured="tfidf")
    cell = {"mean": 0.1622, "low": 0.1, "high": 0.2}
    assert _text(published.reproduction(tfidf, "fact_f1", cell)).startswith("reproduced")
    off = _text(published.reproduction(tfidf, "fact_f1", {**cell, "mean": 0.1581}))
    assert off.startswith("not reproduced : measured minus published -0.004")
    assert published.reproduction(tfidf, "fact_f1", None) == ""
    cited = _text(published.published_html([tfidf], "ds", ["fact_f1"], systems={
        "tfidf": {"fact_f1": cell}}))
    assert "TF-IDF fact_f1 0.162 (0–1) reproduced (measured tfidf 0.162 [0.1, 0.2] )" in cited
    with pytest.raises(ValueError, match="scale 'percentage'"):
        Published("x", "src", "u", "ds", "s", "percentage", ())


def test_every_glossary_link_has_its_entry():
    glossary = (Path(headline.__file__).parent / "how_to_read.md").read_text()
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', glossary))
    html = index_page.glance_table(_choice_records() + _selection_records()) + "\n".join(
        index_page.task_sections(_selection_records())) + str(index_page.macros().index_note())
    used = set(re.findall(r'href="how-to-read\.html#([\w-]+)"', html))
    templates = Path(index_page.__file__).parent / "templates" / "saf"
    used |= set(re.findall(r"term\([^)]*?,\s*['\"]([\w-]+)['\"]\)",
                           Path(index_page.__file__).read_text()
                           + Path(headline.__file__).read_text()
                           + (templates / "run.html.j2").read_text()))
    assert used and used <= anchors, used - anchors
    for term in ("reportable", "interval", "estimand", "paired-difference", "holm",
                 "cluster-t", "primary-comparison", "gold-inputs", "not-distinguishable",
                 "clipped", "published"):
        assert term in anchors


def test_the_title_names_project_tasks_and_data():
    short, tasks = index_page.run_subject(_choice_records() + _selection_records())
    assert short == "SAF & ArgSciChat"
    assert tasks == ("SAF (short answer feedback) on saf_micro_job_german; "
                     "ArgSciChat fact selection on argscichat")


def test_metric_headers_carry_direction_and_range_and_p_values_read_as_p():
    head = headline.metric_head("mse")
    assert "mse" in head and "↓ ≥ 0" in head and "lower is better" in head
    assert [headline.p_text(p) for p in (0.0004, 0.0042, 0.31, 1.0)] == [
        "p < 0.001", "p = 0.004", "p = 0.31", "p = 1.00"]


def test_a_tie_is_called_a_tie():
    recs = [_result("A", "test", "accuracy", 0.5), _result("B", "test", "accuracy", 0.5,
                                                           role="baseline")]
    html = "\n".join(index_page.task_sections(recs))
    assert "<b>A</b> is best: highest accuracy" in html and "tied with <b>B</b>" in html


def test_the_glossary_has_a_line_for_every_registered_system_and_every_term():
    from notebook_reports import tasks
    from notebook_reports.metric_cards import systems_markdown
    from notebook_reports.sharing import md_terms

    text = systems_markdown()
    for sp in tasks.specs():
        for reg in tasks.registries(sp.name):
            for name in reg:
                line = tasks.system_line(sp.name, name)
                assert line and f"role {reg[name].role}" in line, (sp.name, name)
                assert f"`{name}`" in text, name
    assert "reads gold data at test time" in tasks.system_line("argscichat_fact_selection",
                                                               "ensemble_bm25")
    glossary = (Path(index_page.__file__).parent / "how_to_read.md").read_text()
    for anchor in ("not-tested", "fold", "seed", "one-se", "regret", "transductive",
                   "stacked", "gold-inputs"):
        assert f'<a id="{anchor}"></a>' in glossary, anchor
    # the index titles a system's name with its line; verdicts link their terms
    html = index_page.glance_table(_selection_records())
    assert 'class="sysname" title="on each fold, the system chosen' in html
    linked = md_terms("Estimand e: a and b are not distinguishable by the Holm-adjusted test")
    assert "(how-to-read.html#not-distinguishable)" in linked
    assert "(how-to-read.html#holm)" in linked and "(how-to-read.html#estimand)" in linked
