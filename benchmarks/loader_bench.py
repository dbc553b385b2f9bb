"""Speed/memory benchmark of the data loaders at release scale.

Cases (each loaded in a fresh Python process, so that peak memory is the loader's own):

- ``saf-parquet`` / ``saf-jsonl`` / ``saf-csv``: a SAF release whose ``train`` split has
  ``--rows`` rows (default 100k: the real train rows repeated, each under a new id, with 1 in
  50 answers made blank and 1 in 100 labels contradicting the score, so that the anomaly
  checks have work to do); the other three splits are the real ones (or the fixture's).
- ``argscichat-paper``: fold 0 of ArgSciChat with one extra train paper of ``--sentences``
  content sentences (default 100k) and a 6-turn dialogue whose facts and history facts are
  spread over the paper.

Reported per case: seconds of the ``load_*`` call alone (imports excluded; wall clock, and
the CPU time of the process, which a busy shared machine inflates less), the process's
peak resident memory (``VmHWM``, MiB: interpreter, pandas/pyarrow/datasets and the loaded
data together; Linux), and the peak growth over the memory after imports. Also the
anomaly counts, so that a faster loader is seen to find the same things.

Usage: python benchmarks/loader_bench.py [--rows 100000] [--sentences 100000]
       [--cases saf-parquet,argscichat-paper] [--json out.json]
Needs SAF_DATA / ARGSCICHAT_DATA for real rows (falls back to tests/fixtures).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures"
SAF_SPLITS = ("train", "validation", "test_unseen_answers", "test_unseen_questions")
CASES = ("saf-parquet", "saf-jsonl", "saf-csv", "argscichat-paper")

CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")


def hwm():  # peak resident memory of this process in KiB (VmHWM: reset by exec, unlike
    # ru_maxrss, which a child inherits from the process that forked it)
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmHWM")).split()[1])


import pandas, pyarrow, datasets  # noqa: F401  (imports are not the loader's cost)
from saf_utils.saf.data import load_saf
from saf_utils.argscichat.data import load_argscichat
kind, path = sys.argv[1], sys.argv[2]
base = hwm()
t, cpu = time.perf_counter(), time.process_time()
if kind == "saf":
    ds, report = load_saf(path, return_report=True)
    rows = {s: len(ds[s]) for s in ds}
else:
    fold, report = load_argscichat(path, fold=0, return_report=True)
    rows = {s: len(fold[s]) for s in ("train", "val", "test")}
seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
peak = hwm()
found = report[report["count"] > 0]
print(json.dumps({"seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
                  "peak_mib": round(peak / 1024),
                  "growth_mib": round((peak - base) / 1024), "rows": rows,
                  "anomalies": {f"{r.split}/{r.kind}": int(r.count) for r in found.itertuples()}}))
"""


def _saf_frames():
    import pandas as pd

    source = os.environ.get("SAF_DATA")
    if source:
        from saf_utils.saf.data import load_saf

        ds = load_saf(source)
        return {s: ds[s].to_pandas() for s in SAF_SPLITS}
    return {s: pd.read_json(FIX / "saf_legal_jsonl" / f"{s}.jsonl", lines=True, dtype=False)
            for s in SAF_SPLITS}


def make_saf(root: Path, rows: int, fmt: str) -> Path:
    """A SAF release with a ``rows``-row train split, written as ``fmt`` files."""
    import numpy as np

    frames = _saf_frames()
    train = frames["train"]
    big = train.iloc[np.arange(rows) % len(train)].reset_index(drop=True)
    big["id"] = [f"bench-{i}" for i in range(rows)]
    big.loc[big.index % 50 == 7, "provided_answer"] = " "
    flip = big.index % 100 == 3
    big.loc[flip, "verification_feedback"] = np.where(
        big.loc[flip, "score"] == 1.0, "Incorrect", "Correct")
    frames = {**frames, "train": big}
    root.mkdir(parents=True, exist_ok=True)
    for split, df in frames.items():
        df = df.drop(columns=[c for c in df.columns if c not in big.columns])
        if fmt == "parquet":
            (root / "data").mkdir(exist_ok=True)
            df.to_parquet(root / "data" / f"{split}-00000-of-00001.parquet", index=False)
        elif fmt == "jsonl":
            df.to_json(root / f"{split}.jsonl", orient="records", lines=True, force_ascii=False)
        else:
            df.to_csv(root / f"{split}.csv", index=False)
    return root


def make_argscichat(root: Path, sentences: int) -> Path:
    """Fold 0 with an extra train paper of ``sentences`` sentences and a 6-turn dialogue."""
    source = Path(os.environ.get("ARGSCICHAT_DATA") or FIX / "argscichat")
    root.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val", "test"):
        (root / f"fold_0_{split}.json").write_bytes(
            (source / f"fold_0_{split}.json").read_bytes())
    content = [f"Sentence number {i} reports finding {i * 7 % 1000} of the benchmark study."
               for i in range(sentences)]
    pairs = []
    for turn in range(6):
        facts = [content[(turn + 1) * sentences // 8], content[sentences - 1 - turn]]
        pairs.append({"id": f"BENCH_{turn}", "P_Message": f"Question {turn}?",
                      "DE_Message": f"Answer {turn}.", "facts": facts,
                      "history": [m for p in pairs for m in (p["P_Message"], p["DE_Message"])],
                      "history_ids": [p["id"] for p in pairs],
                      "history_facts": [p["facts"] for p in pairs]})
    path = root / "fold_0_train.json"
    papers = json.loads(path.read_text(encoding="utf-8"))
    title = "A Benchmark Paper of Many Sentences"
    papers[title] = {"id": 10**6, "title": title, "content": content, "message_pairs": pairs}
    path.write_text(json.dumps(papers), encoding="utf-8")
    return root


def run_case(case: str, args, tmp: Path) -> dict:
    if case.startswith("saf-"):
        path, kind = make_saf(tmp / case, args.rows, case.split("-")[1]), "saf"
    else:
        path, kind = make_argscichat(tmp / case, args.sentences), "argscichat"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # cwd: "-c" puts the working directory first on sys.path, before PYTHONPATH
    out = subprocess.run([sys.executable, "-c", CHILD, kind, str(path)], env=env, cwd=tmp,
                         capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{case} failed:\n{out.stderr[-3000:]}")
    return {"case": case, **json.loads(out.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--sentences", type=int, default=100_000)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            result = run_case(case, args, Path(tmp))
            results.append(result)
            print(f"{case:18s} {result['seconds']:6.2f} s (CPU {result['cpu_seconds']:.2f} s)  "
                  f"peak {result['peak_mib']:5d} MiB "
                  f"(+{result['growth_mib']} MiB over imports)  rows {result['rows']}  "
                  f"anomalies {result['anomalies']}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
