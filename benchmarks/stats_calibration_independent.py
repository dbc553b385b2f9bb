"""Independent calibration check of the public inference functions, with DGPs that differ
from ``benchmarks/stats_calibration.py`` (whose DGP is logistic-normal throughout).

Functions under test (called exactly as the notebooks call them):
``protocol.headline_table`` (single-system 95 % CI) and ``protocol.paired_table`` (A - B:
CI, p-value) with the designs ``saf.evaluate.design_for(6)`` (item level),
``saf.evaluate.QUESTIONS`` (cluster level, new questions) and
``argscichat.selection_evaluation.DESIGN`` (cluster level stratified by fold, new papers).

Data-generating processes (sizes: SAF questions 44, 54, 41, 52, 41, 39 answers; ArgSciChat
5 folds x 2 papers with 12,9 / 19,13 / 5,18 / 4,6 / 7,11 scored queries):

Item level, questions FIXED within a world (20 worlds x reps/20 answer redraws); truth =
answer-weighted mean of the questions' exact expected accuracies (closed form):

- I1 beta-binomial: question mean m_q ~ U(0.35, 0.9); per answer p_i ~ Beta(m_q k, (1-m_q) k),
  k = 0.5, SHARED by A and B (within-answer correlation of A and B 0.67); A, B ~ Bern(p_i).
- I2 mean-zero, non-exchangeable: Gaussian-threshold model with a shared answer latent
  (rho = 0.9); B's question accuracy m_q ~ U(0.35, 0.8), A's is m_q + 0.15 on questions 1-3
  and m_q - 0.15 * 139/132 on questions 4-6: answer-weighted true difference exactly 0.
- I3 near ceiling: as I1 with m_q ~ U(0.90, 0.99), k = 2.
- I4 effect: as I1, A ~ Bern(p_i + 0.2 (1 - p_i)) (true diff = 0.2 * (1 - mean m_q)).

Cluster level, questions REDRAWN every replicate; logit model
``P(correct) = expit(u_q + v_qs + e_i + delta [s = A])`` with v_qs ~ N(0, 0.5) iid per
system, shared answer effect e_i ~ N(0, 1); truth = E over questions (Monte Carlo, 4e5
questions x 40-node Gauss-Hermite over e):

- C1 heavy tails: u_q = 0.8 + 0.8 t_3.   C2 skewed: u_q = 2.5 - 1.5 Exp(1) (rare very hard
  questions).   C3 effect: C1 with delta = 0.4.
- C4 (stated non-exchangeable null) skewed per-question effect: A gets +0.35 logit on a
  question with prob. 0.8 and -c with prob. 0.2, c solved so that E[A] - E[B] = 0 exactly.

ArgSciChat-like, papers REDRAWN every replicate; Fact-F1-like zero-inflated values: per paper
logit h_ps = mu_f + sd_f z_p + v_ps (v ~ N(0, 0.5) iid per system), structural-zero rate
pi_p ~ Beta(.) shared by the systems; per query g ~ {1,2,3} gold facts (.35/.45/.2), shared
query effect e ~ N(0, 0.8), zero with prob. pi_p, else tp ~ Bin(min(2, g), expit(h + e)) and
value 2 tp / (2 + g) (0, .4, .5, .67, .8, 1). Truth = mean over folds of E[value] per fold
(Monte Carlo, 1e6 papers per fold, conditional expectations):

- A1 homogeneous folds: mu_f = -1, sd_f = 1, pi ~ Beta(2, 3).
- A2 unequal variances: mu_f = (-1, -.5, -1.5, -1, -.8), sd_f = (.5, .5, 2.5, .5, .5) (the
  wide fold is the unbalanced 5/18 one), pi ~ Beta(.5, .8).
- A3 as A2 but the wide fold is fold 1 (19/13, nearly balanced).
- A4 effect: A1 with delta = 0.6 on A's logit.

Columns: coverage of A's 95 % CI, coverage of the A - B CI, type-I error (p <= 0.05, nulls),
power (effects), Monte-Carlo standard errors (item level: clustered by world), se_ratio =
mean estimated SE / actual SD of A's estimate (item level: within-world SD), and the
project's criterion (coverage >= 0.93 for both intervals, type-I <= 0.06).

Usage: python benchmarks/stats_calibration_independent.py [--reps 400] [--only I1,C2,...]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.special import expit
from scipy.stats import norm
from scipy.stats import t as student_t

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from saf_utils.argscichat import selection_evaluation as AEV  # noqa: E402
from saf_utils.saf import scores as SEV  # noqa: E402
from saf_utils.statistics import protocol as P  # noqa: E402

SAF_SIZES = np.array([44, 54, 41, 52, 41, 39])
ARG_SIZES = {0: [12, 9], 1: [19, 13], 2: [5, 18], 3: [4, 6], 4: [7, 11]}
NODES, WEIGHTS = np.polynomial.hermite_e.hermegauss(40)
WEIGHTS = WEIGHTS / WEIGHTS.sum()


def items_frame(a, b, cluster, fold=None) -> pd.DataFrame:
    n = len(a)
    base = {"split": "test", "metric": "m", "item": np.arange(n).astype(str),
            "cluster": np.asarray(cluster).astype(str), "seed": None,
            "fold": fold if fold is not None else None}
    return pd.concat([pd.DataFrame({**base, "system": "A", "value": np.asarray(a, float)}),
                      pd.DataFrame({**base, "system": "B", "value": np.asarray(b, float)})],
                     ignore_index=True)


def se_from_ci(row) -> float:
    """Estimated SE behind a reported CI (t with the df in ``method``, else normal)."""
    m = re.search(r"\(([\d.e+-]+) df\)", str(row["method"]))
    q = student_t.ppf(0.975, float(m.group(1))) if m else norm.ppf(0.975)
    return (row["ci_high"] - row["ci_low"]) / (2 * q)


def evaluate(items, design, ta, tdiff) -> dict:
    h = P.headline_table(items[items.system == "A"], design).iloc[0]
    c = P.paired_table(items, "B", design).iloc[0]
    return {"cov": h.ci_low <= ta <= h.ci_high, "cov_diff": c.ci_low <= tdiff <= c.ci_high,
            "rej": c.p_value <= 0.05, "est": h["mean"], "se": se_from_ci(h), "tdiff": tdiff,
            "mde": c.mde}


# --------------------------------------------------------------------------- item level

def item_world(kind: str, rng) -> dict:
    q = SAF_SIZES.size
    if kind in ("I1", "I4"):
        m, k = rng.uniform(0.35, 0.9, q), 0.5
    elif kind == "I3":
        m, k = rng.uniform(0.90, 0.99, q), 2.0
    else:  # I2
        m = rng.uniform(0.35, 0.8, q)
        shift = np.where(np.arange(q) < 3, 0.15, -0.15 * SAF_SIZES[:3].sum() / SAF_SIZES[3:].sum())
        return {"mb": m, "ma": m + shift}
    tau = 0.2 if kind == "I4" else 0.0
    return {"m": m, "k": k, "tau": tau, "mb": m, "ma": m + tau * (1 - m)}


def item_draw(kind: str, w: dict, rng):
    cl = np.repeat(np.arange(SAF_SIZES.size), SAF_SIZES)
    if kind == "I2":
        rho = 0.9
        z = rng.standard_normal(cl.size)
        la = rho * z + np.sqrt(1 - rho ** 2) * rng.standard_normal(cl.size)
        lb = rho * z + np.sqrt(1 - rho ** 2) * rng.standard_normal(cl.size)
        return la < norm.ppf(w["ma"][cl]), lb < norm.ppf(w["mb"][cl]), cl
    m, k = w["m"][cl], w["k"]
    p = rng.beta(m * k, (1 - m) * k)
    a = rng.random(cl.size) < p + w["tau"] * (1 - p)
    b = rng.random(cl.size) < p
    return a, b, cl


def run_item(kind: str, reps: int, rng) -> list[dict]:
    design = SEV.design_for(SAF_SIZES.size)
    worlds = 20
    per = max(1, reps // worlds)
    out = []
    for wi in range(worlds):
        w = item_world(kind, rng)
        wts = SAF_SIZES / SAF_SIZES.sum()
        ta, tb = float(wts @ w["ma"]), float(wts @ w["mb"])
        for _ in range(per):
            a, b, cl = item_draw(kind, w, rng)
            r = evaluate(items_frame(a, b, cl), design, ta, ta - tb)
            r["world"] = wi
            out.append(r)
    return out


# --------------------------------------------------------------------------- SAF new questions

def f_e(eta: np.ndarray, sd: float = 1.0) -> np.ndarray:
    """E over e ~ N(0, sd) of expit(eta + e)."""
    return expit(np.asarray(eta)[..., None] + sd * NODES) @ WEIGHTS


def draw_u(kind: str, n: int, rng) -> np.ndarray:
    if kind == "C2":
        return 2.5 - 1.5 * rng.exponential(1.0, n)
    return 0.8 + 0.8 * rng.standard_t(3, n)


class SafQuestions:
    SD_S = 0.5

    def __init__(self, kind: str):
        self.kind = kind
        self.delta = 0.4 if kind == "C3" else 0.0
        self.up, self.c = 0.35, None
        rng = np.random.default_rng(12345)
        n = 400_000
        u = draw_u(kind, n, rng)
        va, vb = self.SD_S * rng.standard_normal(n), self.SD_S * rng.standard_normal(n)
        eb = f_e(u + vb).mean()
        if kind == "C4":  # E over the effect mixture, same u and v for A (CRN)
            fa_up, fa = f_e(u + va + self.up), None

            def gap(c):
                return 0.8 * fa_up.mean() + 0.2 * f_e(u + va - c).mean() - f_e(u + va).mean()
            self.c = brentq(gap, 0.0, 20.0)
            fa = 0.8 * fa_up.mean() + 0.2 * f_e(u + va - self.c).mean()
            self.ta, self.tdiff = float(fa), 0.0  # exact by construction (CRN with va ~ vb)
        else:
            self.ta = float(f_e(u + va + self.delta).mean())
            self.tdiff = 0.0 if self.delta == 0 else float(self.ta - f_e(u + va).mean())
        self.tb_check = float(eb)

    def draw(self, rng):
        q = SAF_SIZES.size
        u = draw_u(self.kind, q, rng)
        va, vb = self.SD_S * rng.standard_normal(q), self.SD_S * rng.standard_normal(q)
        g = np.full(q, self.delta)
        if self.kind == "C4":
            g = np.where(rng.random(q) < 0.8, self.up, -self.c)
        cl = np.repeat(np.arange(q), SAF_SIZES)
        e = rng.standard_normal(cl.size)
        a = rng.random(cl.size) < expit(u[cl] + va[cl] + g[cl] + e)
        b = rng.random(cl.size) < expit(u[cl] + vb[cl] + e)
        return a, b, cl


def run_saf_questions(kind: str, reps: int, rng) -> list[dict]:
    m = SafQuestions(kind)
    out = []
    for i in range(reps):
        a, b, cl = m.draw(rng)
        r = evaluate(items_frame(a, b, cl), SEV.QUESTIONS, m.ta, m.tdiff)
        r["world"] = i
        out.append(r)
    return out


# --------------------------------------------------------------------------- ArgSciChat

class ArgPapers:
    SD_S, SD_E = 0.5, 0.8
    G_P = np.array([0.35, 0.45, 0.20])

    def __init__(self, kind: str):
        self.kind = kind
        self.delta = 0.6 if kind == "A4" else 0.0
        if kind in ("A1", "A4"):
            self.mu, self.sd, self.pi = [-1.0] * 5, [1.0] * 5, (2.0, 3.0)
        else:
            self.mu = [-1.0, -0.5, -1.5, -1.0, -0.8]
            self.sd = [0.5, 0.5, 2.5, 0.5, 0.5] if kind == "A2" else [0.5, 2.5, 0.5, 0.5, 0.5]
            self.pi = (0.5, 0.8)
        rng = np.random.default_rng(54321)
        n = 1_000_000
        ta, tb = [], []
        ez = 1 - self.pi[0] / sum(self.pi)  # E[1 - pi], independent of the rest
        g = np.array([1, 2, 3])
        cg = float(self.G_P @ (2 * np.minimum(2, g) / (2 + g)))  # E[2 min(2,g)/(2+g)]
        for f in range(5):
            z = rng.standard_normal(n)
            va, _vb = self.SD_S * rng.standard_normal(n), self.SD_S * rng.standard_normal(n)
            h = self.mu[f] + self.sd[f] * z
            ta.append(ez * cg * f_e(h + va + self.delta, self.SD_E).mean())
            tb.append(ez * cg * f_e(h + va, self.SD_E).mean())  # CRN: va ~ vb
        self.ta = float(np.mean(ta))
        self.tdiff = 0.0 if self.delta == 0 else float(self.ta - np.mean(tb))

    def draw(self, rng):
        a, b, cl, fold = [], [], [], []
        pid = 0
        for f in range(5):
            for n in ARG_SIZES[f]:
                h = self.mu[f] + self.sd[f] * rng.standard_normal()
                ha = h + self.SD_S * rng.standard_normal() + self.delta
                hb = h + self.SD_S * rng.standard_normal()
                pi = rng.beta(*self.pi)
                g = rng.choice([1, 2, 3], size=n, p=self.G_P)
                e = self.SD_E * rng.standard_normal(n)
                zero = rng.random(n) < pi
                for hs, out in ((ha, a), (hb, b)):
                    tp = rng.binomial(np.minimum(2, g), expit(hs + e))
                    out.append(np.where(zero, 0.0, 2 * tp / (2 + g)))
                cl += [f"p{pid}"] * n
                fold += [f] * n
                pid += 1
        return np.concatenate(a), np.concatenate(b), np.array(cl), np.array(fold)


def run_arg(kind: str, reps: int, rng) -> list[dict]:
    m = ArgPapers(kind)
    out = []
    for i in range(reps):
        a, b, cl, fold = m.draw(rng)
        r = evaluate(items_frame(a, b, cl, fold), AEV.DESIGN, m.ta, m.tdiff)
        r["world"] = i
        out.append(r)
    return out


# --------------------------------------------------------------------------- summary

SCENARIOS = {
    "I1": ("SAF item", "beta-binomial, shared answer difficulty", "null", run_item),
    "I2": ("SAF item", "per-question diffs, weighted mean 0 (non-exch.)", "null", run_item),
    "I3": ("SAF item", "near ceiling (acc .90-.99), beta-binomial", "null", run_item),
    "I4": ("SAF item", "beta-binomial, A = p + .2(1-p)", "effect", run_item),
    "C1": ("SAF questions", "t3 question effects", "null", run_saf_questions),
    "C2": ("SAF questions", "skewed question effects (Exp)", "null", run_saf_questions),
    "C3": ("SAF questions", "t3 question effects, delta .4 logit", "effect", run_saf_questions),
    "C4": ("SAF questions", "skewed per-question effect, mean 0 (non-exch.)", "null",
           run_saf_questions),
    "A1": ("ArgSciChat papers", "zero-inflated F1, homogeneous folds", "null", run_arg),
    "A2": ("ArgSciChat papers", "unequal variances, wide fold = 5/18", "null", run_arg),
    "A3": ("ArgSciChat papers", "unequal variances, wide fold = 19/13", "null", run_arg),
    "A4": ("ArgSciChat papers", "zero-inflated F1, delta .6 logit", "effect", run_arg),
}


def rate_se(x: np.ndarray, world: np.ndarray) -> tuple[float, float]:
    """Rate and its Monte-Carlo SE (clustered by world when worlds repeat)."""
    x = x.astype(float)
    p = x.mean()
    binom = np.sqrt(p * (1 - p) / x.size)
    wm = pd.Series(x).groupby(world).mean()
    if wm.size < x.size:
        clus = np.sqrt(wm.var(ddof=1) / wm.size) if wm.size > 1 else binom
        return p, float(max(binom, clus))
    return p, float(binom)


def summarise(key: str, res: list[dict]) -> dict:
    design, dgp, kind, _ = SCENARIOS[key]
    df = pd.DataFrame(res)
    w = df.world.to_numpy()
    cov, cov_se = rate_se(df["cov"].to_numpy(), w)
    covd, covd_se = rate_se(df["cov_diff"].to_numpy(), w)
    rej, rej_se = rate_se(df["rej"].to_numpy(), w)
    if df.world.nunique() < len(df):  # within-world SD of the estimate
        sd = np.sqrt(df.groupby("world").est.var(ddof=1).mean())
    else:
        sd = df.est.std(ddof=1)
    fails = []
    if cov < 0.93:
        fails.append("coverage")
    if covd < 0.93:
        fails.append("coverage diff")
    if kind == "null" and rej > 0.06:
        fails.append("type-I")
    clear = any([cov + 2 * cov_se < 0.93, covd + 2 * covd_se < 0.93,
                 kind == "null" and rej - 2 * rej_se > 0.06])
    verdict = "met" if not fails else ("FAIL: " if clear else "fail (within 2 MCSE): ") \
        + ", ".join(fails)
    return {"id": key, "design": design, "DGP": dgp, "reps": len(df),
            "coverage": f"{cov:.3f} ± {cov_se:.3f}",
            "coverage diff": f"{covd:.3f} ± {covd_se:.3f}",
            "type-I": f"{rej:.3f} ± {rej_se:.3f}" if kind == "null" else "",
            "power": f"{rej:.3f} ± {rej_se:.3f}" if kind == "effect" else "",
            "true diff": f"{df.tdiff.mean():.3f}",
            "se_ratio": f"{df.se.mean() / sd:.2f}",
            "median mde": f"{np.median(df.mde):.3f}",
            "criterion": verdict}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--only", default=",".join(SCENARIOS))
    args = ap.parse_args(argv)
    t0 = time.time()
    rows = []
    for i, key in enumerate(args.only.split(",")):
        t1 = time.time()
        rng = np.random.default_rng([args.seed, i])
        res = SCENARIOS[key][3](key, args.reps, rng)
        rows.append(summarise(key, res))
        print(f"{key}: {time.time() - t1:.0f}s", file=sys.stderr, flush=True)
    table = pd.DataFrame(rows)
    print(table.to_markdown(index=False))
    print(f"\n{len(table)} scenarios, {args.reps} reps each, {time.time() - t0:.0f}s")
    return 0 if table.criterion.eq("met").all() else 1


if __name__ == "__main__":
    sys.exit(main())
