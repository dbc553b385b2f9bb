"""Every value a run records lies inside its metric's declared range: the records of
metrics.json (values and interval ends; paired differences and p-values excepted, they
have their own ranges) and every notebook's per-item scores. A metric that declares no
range (a rescaled one: ``bertscore_f1_rescaled``) is not checked.

Over the session's smoke run by default; ``SAF_SMOKE_RUN=<run folder>`` checks any run (a
cpu run: ``SAF_SMOKE_RUN=reports/<run> pytest tests/test_metric_ranges.py``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from notebook_reports.crossrun import paired_test
from saf_utils.metrics import bounds, metric

pytestmark = pytest.mark.slow
#: slack for floating-point sums (a mean of values in [0, 1] may end at 1 + 2e-16)
EPS = 1e-9


def _outside(name: str, value: object) -> bool:
    b = bounds(name)
    if b is None or not isinstance(value, int | float) or isinstance(value, bool) \
            or not math.isfinite(value):
        return False
    return not (b[0] - EPS <= value <= b[1] + EPS)


def out_of_range(run: Path) -> list[str]:
    """Each recorded value (record value or interval end, per-item score) outside its
    metric's declared range, as ``file: metric system split = value (range)``."""
    bad = []
    for r in json.loads((run / "metrics.json").read_text(encoding="utf-8"))["records"]:
        if paired_test(r.get("subset")) is not None or "_minus_" in str(r.get("split")):
            continue  # a difference or a p-value, not a value of the metric
        name = str(r.get("metric"))
        for key in ("value", "ci_low", "ci_high"):
            if _outside(name, r.get(key)):
                bad.append(f"metrics.json: {name} {r.get('system')} {r.get('split')} "
                           f"{key} = {r[key]} (range {metric(name).range})")
    import gzip

    for path in sorted(run.glob("*/items.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                name = str(r.get("metric"))
                if _outside(name, r.get("value")):
                    bad.append(f"{path.parent.name}/{path.name}: {name} {r.get('system')} "
                               f"{r.get('split')} = {r['value']} (range {metric(name).range})")
    return bad


def test_every_recorded_value_lies_in_its_metrics_declared_range(smoke_run):
    run, code = smoke_run
    assert code == 0
    assert (run / "metrics.json").is_file()
    bad = out_of_range(run)
    assert not bad, f"{len(bad)} value(s) outside their metric's range: {bad[:10]}"


def test_moverscore_declares_what_its_implementation_can_produce():
    """1 - EMD between unit vectors (Euclidean distance in [0, 2]) lies in [-1, 1]; the card
    names the model and says the values are not the paper's."""
    m = metric("moverscore")
    assert bounds("moverscore") == (-1.0, 1.0)
    assert "MiniLM" in m.definition and "not comparable" in m.definition
    assert bounds("bertscore_f1_rescaled") is None
