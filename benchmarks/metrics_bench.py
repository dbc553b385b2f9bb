"""Speed/memory benchmark: batched BERTScore/MoverScore vs straightforward per-pair calls.

Pairs: SAF feedback (test_unseen_questions), hypothesis = gold feedback of a shuffled
answer, reference = gold feedback. CPU, local all-MiniLM-L6-v2. The slow per-pair
baselines run on a subset (``--n-slow``) and their pairs/s are measured there (not
extrapolated from the fast path). Memory: peak RSS growth of the process
(``resource.getrusage(...).ru_maxrss`` delta, KiB on Linux), which includes torch
buffers that tracemalloc cannot see; the first method run also pays model loading.

Usage: python benchmarks/metrics_bench.py [--n 500] [--n-slow 60]
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from saf_utils.encoders.sentence import minilm_path  # noqa: E402
from saf_utils.metrics import embedding as em  # noqa: E402
from saf_utils.metrics import mover as mv  # noqa: E402


def load_pairs(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    data = Path(os.environ.get("SAF_DATA", ROOT.parent / "shared/data/saf_micro_job_german"))
    files = sorted(glob.glob(str(data / "data" / "test_unseen_questions-*.parquet")))
    files += sorted(glob.glob(str(data / "data" / "validation-*.parquet")))
    df = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    refs = df["answer_feedback"].astype(str).tolist()[:n]
    rng = np.random.default_rng(seed)
    hyps = [refs[i] for i in rng.permutation(len(refs))]
    return hyps, refs


def measure(fn) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    out = fn()
    secs = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": secs, "peak_rss_growth_mib": (after - before) / 1024, "out": out}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--n-slow", type=int, default=60)
    args = ap.parse_args()
    import torch

    hyps, refs = load_pairs(args.n)
    n_slow = min(args.n_slow, len(refs))
    path = minilm_path()
    spec = importlib.util.spec_from_file_location(
        "ref_impl", ROOT / "tests" / "test_embedding_metrics.py"
    )
    ref_impl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref_impl)

    # Warm up: load both models once so timings compare scoring, not loading.
    em.bertscore(hyps[:2], refs[:2], device="cpu")
    model, tok = mv.load_encoder(path)

    results: dict[str, dict] = {}
    results["bertscore_batched"] = measure(lambda: em.bertscore(hyps, refs, device="cpu"))
    results["bertscore_per_pair"] = measure(
        lambda: [em.bertscore([h], [r], device="cpu")["f1"]
                 for h, r in zip(hyps[:n_slow], refs[:n_slow], strict=True)]
    )
    results["moverscore_batched"] = measure(lambda: mv.moverscore(refs, hyps, path))
    results["moverscore_per_pair_reference"] = measure(
        lambda: ref_impl.ref_word_mover_score(refs[:n_slow], hyps[:n_slow], model, tok)
    )
    # agreement on the shared subset (IDF is over the corpus given, so re-run on it)
    fast_sub = mv.moverscore(refs[:n_slow], hyps[:n_slow], path)
    slow_sub = results["moverscore_per_pair_reference"]["out"]
    bs_sub = results["bertscore_batched"]["out"]["f1_per_pair"][:n_slow]

    report = {
        "n_pairs": len(refs), "n_pairs_per_pair_baselines": n_slow,
        "torch_threads": torch.get_num_threads(), "model": path,
        "memory_measure": "ru_maxrss delta (MiB), process peak RSS growth",
    }
    for name, r in results.items():
        n = n_slow if "per_pair" in name else len(refs)
        report[name] = {
            "pairs": n, "seconds": round(r["seconds"], 3),
            "pairs_per_s": round(n / r["seconds"], 2),
            "peak_rss_growth_mib": round(r["peak_rss_growth_mib"], 1),
        }
    report["speedup_bertscore"] = round(
        report["bertscore_batched"]["pairs_per_s"] / report["bertscore_per_pair"]["pairs_per_s"], 1
    )
    report["speedup_moverscore"] = round(
        report["moverscore_batched"]["pairs_per_s"]
        / report["moverscore_per_pair_reference"]["pairs_per_s"], 1
    )
    report["moverscore_max_abs_diff_vs_reference"] = float(
        np.max(np.abs(np.asarray(fast_sub) - np.asarray(slow_sub)))
    )
    report["bertscore_max_abs_diff_batched_vs_per_pair"] = float(
        np.max(np.abs(np.asarray(bs_sub) - np.asarray(results["bertscore_per_pair"]["out"])))
    )
    out = ROOT / "benchmarks" / "results" / "metrics_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
