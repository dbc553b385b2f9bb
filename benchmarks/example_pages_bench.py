"""Size of the example pages at one and ten times the data.

A synthetic run folder holds 02's SAF predictions (``--answers`` evaluated answers, each
through ``--systems`` systems, texts of the real data's lengths: question 150, reference and
answer 200, feedback 200 characters) and per-item scores of three metrics; the example pages
are written as a run writes them (:func:`saf_utils.reporting.examples.write_example_pages`).
Reported per scale: the number of pages, the largest page in bytes and the seconds to write
them. The pages are split into pages of ``examples.PER_PAGE`` examples, so the largest
page stays the same at ten times the data (one page of every answer was 9.2 MB for the real
1,179 answers and 15 systems, 92 MB at ten times).

Usage: python benchmarks/example_pages_bench.py [--answers 1179] [--systems 15] [--scale 10]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd

from saf_utils import artifacts as AR
from saf_utils.reporting import examples
from saf_utils.reporting.records import Recorder

NOTEBOOK = "02_baseline_finetuning"
SPLITS = ("test_unseen_answers", "test_unseen_questions", "validation")


def synthetic_saf_run(run: Path, answers: int, systems: int) -> dict:
    """A run folder with 02's predictions and item scores; returns its manifest."""
    rec = Recorder(NOTEBOOK, run / NOTEBOOK)
    rows, items = [], []
    for i in range(answers):
        split, ex = SPLITS[i % len(SPLITS)], f"a{i}"
        for s in range(systems):
            rows.append({"id": ex, "split": split, "question": f"Frage {i} " + "q" * 140,
                         "provided_answer": f"Antwort {i} " + "a" * 190,
                         "reference_answer": "r" * 200, "gold_label": "Correct",
                         "gold_score": 1.0, "gold_feedback": "g" * 200, "system": f"sys{s}",
                         "seed": None, "pred_label": "Correct" if (i + s) % 3 else "Incorrect",
                         "pred_score": 0.5, "pred_feedback": f"feedback {s} " + "f" * 190,
                         "parseable": True})
            items += [{"task": "saf", "dataset": "bench", "split": split, "system": f"sys{s}",
                       "metric": m, "item": ex, "cluster": f"q{i % 40}", "value": 0.5,
                       "seed": None, "fold": None} for m in ("accuracy", "bleu", "rouge2")]
    for s in range(systems):
        rec.add("saf", "bench", SPLITS[0], f"sys{s}", "accuracy", 0.5, role="system")
    rec.add_items(pd.DataFrame(items))
    rec.close()
    AR.write_saf_predictions(pd.DataFrame(rows), run / NOTEBOOK)
    return {"run": run.name, "notebooks": [{"name": NOTEBOOK, "status": "ok"}]}


def measure(answers: int, systems: int) -> dict:
    """Pages, largest page (bytes) and seconds of the example pages of one synthetic run."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        manifest = synthetic_saf_run(run, answers, systems)
        t0 = time.perf_counter()
        pages = examples.write_example_pages(run, manifest, [])
        seconds = time.perf_counter() - t0
        sizes = [p.stat().st_size for p in pages]
    return {"answers": answers, "systems": systems, "pages": len(sizes),
            "largest_bytes": max(sizes), "total_bytes": sum(sizes),
            "seconds": round(seconds, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--answers", type=int, default=1179)
    ap.add_argument("--systems", type=int, default=15)
    ap.add_argument("--scale", type=int, default=10)
    args = ap.parse_args()
    for n in (args.answers, args.answers * args.scale):
        print(json.dumps(measure(n, args.systems)), flush=True)


if __name__ == "__main__":
    main()
