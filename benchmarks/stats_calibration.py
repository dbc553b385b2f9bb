"""Calibration benchmark: coverage, type-I error and power of every design the reports use.

It calls exactly what the notebooks call (:func:`saf_utils.statistics.protocol.headline_table`,
:func:`~saf_utils.statistics.protocol.paired_table`, :func:`~saf_utils.statistics.protocol.estimate`
/ :func:`~saf_utils.statistics.protocol.compare` with corpus statistics for macro-F1) with the
designs of :mod:`saf_utils.saf.scores` and :mod:`saf_utils.argscichat.selection_evaluation`, on
synthetic test sets shaped like the real ones:

- cluster sizes from the data (SAF questions of each test split; ArgSciChat scored test
  queries per paper in each fold), read from ``SAF_DATA`` / ``ARGSCICHAT_DATA``;
- between-cluster variance and cluster × system variance estimated from the data with a
  two-way decomposition (logit scale) of per-cluster scores of cheap real systems: SAF
  per-question majority label, global majority label and a label drawn from the question's
  training distribution; ArgSciChat First and TF-IDF selectors (Fact-F1 per query);
- a shared item effect (answers / queries that are hard for every system), sd 1 (logit).

Data-generating process. Each item of cluster c has a success probability
``sigmoid(mu + u_c + v_cs + delta * [s = A] + e_i)``; SAF answers are right with it (a wrong
label is one of the two other labels; gold labels follow the question's label mix), ArgSciChat
queries score ``Binomial(2, p) / 2`` (Fact-F1-like values 0, 0.5, 1). Truths are computed
from the model (large Monte Carlo), for the design's estimand: *these clusters* (clusters
held fixed within a "world", answers redrawn) or *new clusters* (clusters redrawn).

Scenarios: an exchangeable null (A and B identically distributed per cluster), a mean-zero
null for the item-level designs (A and B differ per question, the answer-weighted difference
is 0), and an effect (``delta`` giving about +0.05 accuracy / Fact-F1). For contrast, the
percentile cluster bootstrap that the reports used before is measured too (``old`` rows).

A method ships only if, in every design it is used for, coverage >= 0.93 and type-I error
<= 0.06 (the ``ok`` column; exit code 1 otherwise). ``mc_se`` is the Monte-Carlo standard
error of a 0.95 coverage at this many data sets (0.005 at the default 2000): with fewer
replicates a method whose true coverage is 0.94 fails the gate by chance.

Usage: python benchmarks/stats_calibration.py [--reps 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import expit, logit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from saf_utils.argscichat import selection_evaluation as AEV  # noqa: E402
from saf_utils.metrics import metric  # noqa: E402
from saf_utils.saf import scores as SEV  # noqa: E402
from saf_utils.statistics import protocol as P  # noqa: E402
from saf_utils.statistics import uncertainty  # noqa: E402

LABELS = ("Correct", "Partially correct", "Incorrect")
ITEM_SD = 1.0  # shared item difficulty (logit)


# --------------------------------------------------------------------------- estimates

def two_way(matrix: np.ndarray) -> tuple[float, float, float]:
    """(mu, between-cluster sd, cluster x system sd) of a clusters x systems logit matrix."""
    m = np.clip(matrix, 0.02, 0.98)
    x = logit(m)
    c, s = x.shape
    grand = x.mean()
    resid = x - x.mean(1, keepdims=True) - x.mean(0, keepdims=True) + grand
    var_cs = float((resid ** 2).sum() / ((c - 1) * (s - 1)))
    var_b = max(float(x.mean(1).var(ddof=1)) - var_cs / s, 0.0)
    return float(grand), float(np.sqrt(var_b)), float(np.sqrt(var_cs))


def saf_shape(source: str | None) -> dict:
    """Question sizes of the SAF test splits, label mixes and variance estimates."""
    from saf_utils.saf.data import load_saf

    ds = load_saf(source)
    train = ds["train"].to_pandas()
    rng = np.random.default_rng(0)
    overall = train.verification_feedback.mode().iloc[0]
    rows, mixes = [], []
    for split in ("validation", "test_unseen_answers"):
        test = ds[split].to_pandas()
        for q, g in test.groupby("question"):
            tr = train[train.question == q].verification_feedback
            if tr.empty:
                continue
            maj = tr.mode().iloc[0]
            draw = rng.choice(tr.to_numpy(), size=len(g))
            gold = g.verification_feedback.to_numpy()
            rows.append([np.mean(gold == maj), np.mean(gold == overall), np.mean(gold == draw)])
            mixes.append([np.mean(gold == lab) for lab in LABELS])
    mu, sd_b, sd_s = two_way(np.array(rows))
    sizes = {s: ds[s].to_pandas().groupby("question").size().tolist()
             for s in ("test_unseen_answers", "test_unseen_questions")}
    return {"mu": mu, "sd_b": sd_b, "sd_s": sd_s, "sizes": sizes,
            "mixes": np.array(mixes), "n_questions_for_estimates": len(rows)}


def argscichat_shape(source: str | None) -> dict:
    """Scored test queries per paper and fold, variance estimates from First and TF-IDF."""
    from saf_utils.argscichat import fact_selection as FS
    from saf_utils.argscichat.data import load_argscichat
    from saf_utils.metrics import fact_f1

    sizes, rows = {}, []
    for fold in range(5):
        test = [p for p in load_argscichat(source, fold=fold).test if p.fact_indexes]
        papers = pd.Series([p.paper_id for p in test])
        sizes[fold] = papers.value_counts().sort_index().tolist()
        for paper in papers.unique():
            mine = [p for p in test if p.paper_id == paper]
            rows.append([np.mean([fact_f1(FS.select_first(p, 2), p.fact_indexes) for p in mine]),
                         np.mean([fact_f1(FS.select_tfidf(p, 2), p.fact_indexes)
                                  for p in mine])])
    mu, sd_b, sd_s = two_way(np.array(rows))
    return {"mu": mu, "sd_b": sd_b, "sd_s": sd_s, "sizes": sizes}


# --------------------------------------------------------------------------- simulation

def _labels(p: np.ndarray, gold: np.ndarray, rng) -> np.ndarray:
    right = rng.random(p.size) < p
    shift = rng.integers(1, 3, p.size)
    return np.where(right, gold, (gold + shift) % 3)


class World:
    """Cluster-level parameters of one draw of clusters (questions or papers)."""

    def __init__(self, sizes, shape, rng, delta=0.0, zero_mean=False, exchangeable=False):
        self.sizes = np.asarray(sizes)
        c = self.sizes.size
        self.base = shape["mu"] + shape["sd_b"] * rng.standard_normal(c)
        self.va = shape["sd_s"] * rng.standard_normal(c)
        self.vb = self.va.copy() if exchangeable else shape["sd_s"] * rng.standard_normal(c)
        self.delta = delta
        mixes = shape.get("mixes")
        self.mix = (mixes[rng.integers(0, len(mixes), c)] if mixes is not None else None)
        if zero_mean:  # shift A so that the size-weighted true difference is 0
            from scipy.optimize import brentq
            self.delta = brentq(lambda d: self.true_diff(d), -5, 5)

    _NODES, _W = np.polynomial.hermite_e.hermegauss(40)

    def expected(self, eta: np.ndarray) -> np.ndarray:
        """E over the item effect of sigmoid(eta + e), per cluster."""
        w = self._W / self._W.sum()
        return expit(eta[:, None] + ITEM_SD * self._NODES[None, :]) @ w

    def true_diff(self, d: float) -> float:
        pa = self.expected(self.base + self.va + d)
        pb = self.expected(self.base + self.vb)
        return float(np.sum(self.sizes * (pa - pb)) / self.sizes.sum())

    def truth(self) -> tuple[float, float]:
        pa = self.expected(self.base + self.va + self.delta)
        pb = self.expected(self.base + self.vb)
        w = self.sizes / self.sizes.sum()
        return float(w @ pa), float(w @ pb)

    def draw(self, rng, scale: int = 1) -> pd.DataFrame:
        """Items of systems A and B (values 0/1 accuracy or Binomial(2, p)/2), gold labels."""
        n = self.sizes * scale
        cl = np.repeat(np.arange(self.sizes.size), n)
        e = ITEM_SD * rng.standard_normal(cl.size)
        pa = expit(self.base[cl] + self.va[cl] + self.delta + e)
        pb = expit(self.base[cl] + self.vb[cl] + e)
        out = pd.DataFrame({"cluster": cl.astype(str), "item": np.arange(cl.size).astype(str),
                            "pa": pa, "pb": pb})
        if self.mix is not None:
            u = rng.random(cl.size)
            out["gold"] = (u[:, None] > np.cumsum(self.mix[cl], 1)).sum(1).clip(0, 2)
            out["la"] = _labels(pa, out.gold.to_numpy(), rng)
            out["lb"] = _labels(pb, out.gold.to_numpy(), rng)
            out["a"], out["b"] = (out.la == out.gold).astype(float), (out.lb == out.gold
                                                                       ).astype(float)
        else:
            out["a"] = rng.binomial(2, pa) / 2
            out["b"] = rng.binomial(2, pb) / 2
        return out


def items_frame(d: pd.DataFrame, folds: np.ndarray | None = None) -> pd.DataFrame:
    # a 0-1 metric: intervals are clipped to its range, as in the reports
    base = {"split": "test", "metric": "accuracy", "item": d["item"], "cluster": d["cluster"],
            "seed": None, "fold": folds if folds is not None else None}
    return pd.concat([pd.DataFrame({**base, "system": "A", "value": d.a}),
                      pd.DataFrame({**base, "system": "B", "value": d.b})], ignore_index=True)


def macro_f1_truth(world: World, rng) -> float:
    big = world.draw(rng, scale=200)
    mat, fn = metric("macro_f1").statistics([LABELS[i] for i in big.gold],
                                            [LABELS[i] for i in big.la], labels=LABELS)
    return float(fn(mat.sum(0)[None])[0])


# --------------------------------------------------------------------------- designs

def run_item_design(name, sizes, shape, design, reps, rng, macro=False) -> list[dict]:
    """Clusters fixed per world (25 worlds), answers redrawn: *these clusters*."""
    out = []
    worlds_n = 50
    per = max(1, reps // worlds_n)
    for scenario, kw in (("null (exchangeable)", {"exchangeable": True}),
                         ("null (mean zero)", {"zero_mean": True}),
                         ("effect", {"delta": 0.35})):
        hits = {k: [] for k in ("cov", "cov_diff", "rej", "old_cov", "old_rej", "f1_cov",
                                "f1_cov_diff", "f1_rej", "mde")}
        diffs = []
        for _ in range(worlds_n):
            w = World(sizes, shape, rng, **kw)
            ta, tb = w.truth()
            f1a = macro_f1_truth(w, rng) if macro else None
            for _ in range(per):
                d = w.draw(rng)
                it = items_frame(d)
                h = P.headline_table(it, design).set_index("system").loc["A"]
                hits["cov"].append(h.ci_low <= ta <= h.ci_high)
                c = P.paired_table(it, "B", design).iloc[0]
                hits["cov_diff"].append(c.ci_low <= ta - tb <= c.ci_high)
                hits["rej"].append(c.p_value <= 0.05)
                hits["mde"].append(c.mde)
                diffs.append(ta - tb)
                old = uncertainty.cluster_bootstrap(d.a.to_numpy(), clusters=d.cluster.tolist(),
                                              n_resamples=design.n_resamples)
                hits["old_cov"].append(old.low <= ta <= old.high)
                oldd = uncertainty.cluster_bootstrap((d.a - d.b).to_numpy(),
                                               clusters=d.cluster.tolist(),
                                               n_resamples=design.n_resamples)
                hits["old_rej"].append(oldd.low > 0 or oldd.high < 0)
                if macro:
                    frame = pd.DataFrame({"cluster": d.cluster})
                    ga = [LABELS[i] for i in d.gold]
                    f1 = metric("macro_f1")
                    sa, fn = f1.statistics(ga, [LABELS[i] for i in d.la], labels=LABELS)
                    sb, _ = f1.statistics(ga, [LABELS[i] for i in d.lb], labels=LABELS)
                    e = P.estimate(frame, design, corpus=(sa, fn))
                    hits["f1_cov"].append(e["ci_low"] <= f1a <= e["ci_high"])
                    cc = P.compare(frame, frame, design, corpus=(sa, sb, fn))
                    hits["f1_rej"].append(cc["p_value"] <= 0.05)
        out.append(_row(name, design, scenario, "accuracy", hits["cov"], hits["cov_diff"],
                        hits["rej"], diffs, mde=hits["mde"]))
        out.append(_row(name, design, scenario, "accuracy (old: percentile cluster bootstrap)",
                        hits["old_cov"], None, hits["old_rej"], diffs, shipped=False))
        if macro:
            out.append(_row(name, design, scenario, "macro-F1 (corpus statistic)",
                            hits["f1_cov"], None, hits["f1_rej"], diffs))
    return out


def run_cluster_design(name, sizes, shape, design, reps, rng, folds=None) -> list[dict]:
    """Clusters redrawn every replicate: *new clusters*."""
    out = []
    # the truth for new clusters: E over clusters, by Monte Carlo over many worlds
    many = World(np.ones(200_000, dtype=int), shape, np.random.default_rng(1))
    for scenario, kw in (("null (exchangeable)", {}), ("effect", {"delta": 0.35})):
        # common random numbers: va and vb are iid, so E over vb equals E over va
        ta = float(many.expected(many.base + many.va + kw.get("delta", 0.0)).mean())
        tb = float(many.expected(many.base + many.va).mean())
        hits = {k: [] for k in ("cov", "cov_diff", "rej", "old_cov", "old_rej", "mde")}
        for _ in range(reps):
            w = World(sizes, shape, rng, **kw)
            d = w.draw(rng)
            f = None if folds is None else np.asarray(folds)[d.cluster.astype(int)]
            it = items_frame(d, f)
            h = P.headline_table(it, design).set_index("system").loc["A"]
            hits["cov"].append(h.ci_low <= ta <= h.ci_high)
            c = P.paired_table(it, "B", design).iloc[0]
            hits["cov_diff"].append(c.ci_low <= ta - tb <= c.ci_high)
            hits["rej"].append(c.p_value <= 0.05)
            hits["mde"].append(c.mde)
            strata = None if f is None else f.tolist()
            st, fn = (uncertainty.stratum_mean_stat(d.a.to_numpy(), strata) if strata
                      else uncertainty.mean_stat(d.a.to_numpy()))
            old = uncertainty.cluster_bootstrap(st, fn, clusters=d.cluster.tolist(), strata=strata,
                                          n_resamples=design.n_resamples)
            hits["old_cov"].append(old.low <= ta <= old.high)
            sd, fd = (uncertainty.stratum_mean_stat((d.a - d.b).to_numpy(), strata) if strata
                      else uncertainty.mean_stat((d.a - d.b).to_numpy()))
            oldd = uncertainty.cluster_bootstrap(sd, fd, clusters=d.cluster.tolist(), strata=strata,
                                           n_resamples=design.n_resamples)
            hits["old_rej"].append(oldd.low > 0 or oldd.high < 0)
        out.append(_row(name, design, scenario, "mean", hits["cov"], hits["cov_diff"],
                        hits["rej"], [ta - tb], mde=hits["mde"]))
        out.append(_row(name, design, scenario, "mean (old: percentile cluster bootstrap)",
                        hits["old_cov"], None, hits["old_rej"], [ta - tb], shipped=False))
    return out


def _row(design_name, design, scenario, metric, cov, cov_diff, rej, diffs, shipped=True,
         mde=None):
    null = scenario.startswith("null")
    return {"design": design_name, "estimand": design.estimand, "metric": metric,
            "scenario": scenario, "reps": len(cov),
            "coverage": float(np.mean(cov)) if cov else np.nan,
            "mc_se": float(np.sqrt(0.95 * 0.05 / len(cov))) if cov else np.nan,
            "coverage_diff": float(np.mean(cov_diff)) if cov_diff else np.nan,
            "type_I": float(np.mean(rej)) if null else np.nan,
            "power": np.nan if null else float(np.mean(rej)),
            "true_diff": float(np.mean(diffs)),
            "mde": float(np.median(mde)) if mde else np.nan, "shipped": shipped}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" /
                                          "stats_calibration.json"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.time()
    rng = np.random.default_rng(args.seed)
    saf = saf_shape(os.environ.get("SAF_DATA"))
    arg = argscichat_shape(os.environ.get("ARGSCICHAT_DATA"))
    print(f"SAF: mu {saf['mu']:.2f}, between-question sd {saf['sd_b']:.2f}, question x system "
          f"sd {saf['sd_s']:.2f} (logit; {saf['n_questions_for_estimates']} questions); "
          f"sizes {saf['sizes']}")
    print(f"ArgSciChat: mu {arg['mu']:.2f}, between-paper sd {arg['sd_b']:.2f}, paper x "
          f"system sd {arg['sd_s']:.2f}; scored test queries per paper {arg['sizes']}")
    n = args.resamples
    ua, uq = saf["sizes"]["test_unseen_answers"], saf["sizes"]["test_unseen_questions"]
    rows = []
    rows += run_item_design("SAF test_unseen_answers", ua, saf,
                            SEV.design_for(len(ua), n), args.reps, rng, macro=True)
    rows += run_item_design("SAF test_unseen_questions", uq, saf,
                            SEV.design_for(len(uq), n), args.reps, rng)
    rows += run_cluster_design("SAF test_unseen_answers, new questions", ua, saf,
                               SEV.QUESTIONS.but(n_resamples=n), args.reps, rng)
    sizes = [s for f in sorted(arg["sizes"]) for s in arg["sizes"][f]]
    folds = [f for f in sorted(arg["sizes"]) for _ in arg["sizes"][f]]
    rows += run_cluster_design("ArgSciChat test (5 folds x 2 papers)", sizes, arg,
                               AEV.DESIGN.but(n_resamples=n), args.reps, rng, folds=folds)
    table = pd.DataFrame(rows)
    shipped = table[table.shipped]
    bad = shipped[(shipped.coverage < 0.93) | (shipped.coverage_diff < 0.93)
                  | (shipped.type_I > 0.06)]
    table["ok"] = ~table.index.isin(bad.index) & table.shipped
    fmt = table.drop(columns=["shipped"]).copy()
    for c in ("coverage", "mc_se", "coverage_diff", "type_I", "power", "true_diff", "mde"):
        fmt[c] = fmt[c].map(lambda x: "" if pd.isna(x) else f"{x:.3f}")
    print(fmt.to_markdown(index=False))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"rows": rows, "saf": {k: v for k, v in saf.items()
                                                                 if k != "mixes"},
                                           "argscichat": arg, "seconds": time.time() - t0},
                                          indent=1, default=float))
    print(f"{len(table)} rows in {time.time() - t0:.0f}s; shipped methods "
          f"{'all pass' if bad.empty else 'FAIL: ' + ', '.join(bad.design + ' ' + bad.metric)}")
    return 0 if bad.empty else 1


if __name__ == "__main__":
    sys.exit(main())
