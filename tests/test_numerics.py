"""Same numbers on any machine: pinned kernels and threads, rounded
features, rounded tie-breaks; and a system run under two numeric settings in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from saf_utils import determinism
from saf_utils.encoders.sentence import l2_normalize
from saf_utils.saf import baselines
from saf_utils.statistics import validation_choice as VC

ROOT = Path(__file__).resolve().parents[1]


def test_rounding_removes_last_bit_differences():
    x = np.array([0.123456789, -1e-12, np.nan, 0.5])
    y = np.nextafter(x, 1.0)  # another kernel's last bit
    assert not np.array_equal(x, y, equal_nan=True)
    rx, ry = determinism.round_features(x), determinism.round_features(y)
    assert np.array_equal(rx, ry, equal_nan=True) and rx.dtype == np.float64
    assert str(rx[1]) == "0.0"  # no -0.0
    assert l2_normalize(np.ones((2, 3), dtype=np.float32)).dtype == np.float64


def test_ties_on_a_score_break_by_the_stated_order_after_rounding():
    a = 0.1 + 0.2  # 0.30000000000000004: the same F1 summed in another order
    assert round(a, determinism.SCORE_DECIMALS) == 0.3 and a != 0.3
    t = pd.DataFrame({"name": ["x", "y", "z"], "s": [0.3, a, 0.31]})
    assert list(determinism.sort_best(t, "s").name) == ["z", "x", "y"]
    assert list(determinism.sort_best(t, "s", lower_is_better=True).name) == ["x", "y", "z"]
    t.loc[0, "s"] = np.nan  # NaN never wins
    assert list(determinism.sort_best(t, "s").name) == ["z", "y", "x"]


def test_choice_on_validation_ignores_float_noise():
    """Two systems whose validation score differs only in the last bit: the first in the
    stated order wins, whatever the processor summed (before: the last bit decided)."""
    table = pd.DataFrame({"system": ["feature_clf", "feature_clf:stacked"],
                          "value": [0.3, 0.1 + 0.2]})
    roles = {"feature_clf": "system", "feature_clf:stacked": "system"}
    assert VC.choose_from(table, "macro_f1", roles).per_fold[None] == "feature_clf"
    table.loc[1, "value"] = 0.3 + 1e-6  # a real difference still counts
    assert VC.choose_from(table, "macro_f1", roles).per_fold[None] == "feature_clf:stacked"


def test_pinned_environment_and_native_mode(monkeypatch):
    monkeypatch.delenv("SAF_NUMERICS", raising=False)
    monkeypatch.setenv("SAF_NUM_THREADS", "3")
    env = determinism.pinned_environment()
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "3"
    if determinism.has_avx2():
        assert env["ATEN_CPU_CAPABILITY"] == "avx2" and env["OPENBLAS_CORETYPE"] == "Haswell"
    monkeypatch.setenv("SAF_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="SAF_NUM_THREADS"):
        determinism.threads()
    monkeypatch.setenv("SAF_NUMERICS", "native")
    assert determinism.pinned_environment() == {} and determinism.pin_threads() == 0


def test_thresholds_and_neighbours_are_stable_under_last_bit_noise():
    """Cosines that differ in the last bits give the same cut points and neighbours."""
    rng = np.random.default_rng(0)
    cos = np.round(rng.uniform(0, 1, 60), 3)
    labels = np.where(cos > 0.66, "Correct", np.where(cos < 0.33, "Incorrect",
                                                      "Partially correct"))
    a = baselines.ReferenceThresholds().fit(determinism.round_features(cos), labels)
    b = baselines.ReferenceThresholds().fit(determinism.round_features(np.nextafter(cos, 2)),
                                            labels)
    assert (a.lo, a.hi) == (b.lo, b.hi)


PROBE = r"""
import functools, hashlib, json, sys
import numpy as np
sys.path.insert(0, "tests")
from saf_frames import toy_frame
from saf_utils.training import jobs as J
from saf_utils.encoders.sentence import DEFAULT_ENCODER, encode
from saf_utils.saf import baselines as B, features as F

train = toy_frame("train", ("Q1", "Q2"), 9, 0)
test = toy_frame("test", ("Q1", "Q2", "Q3"), 6, 1)  # Q3: an unseen question
enc = functools.partial(encode, model=DEFAULT_ENCODER)
texts = [*train.provided_answer, *train.reference_answer, *test.provided_answer]
out = {"embeddings": hashlib.sha256(np.ascontiguousarray(enc(texts)).tobytes()).hexdigest()}
cols = ["pred_label", "pred_score", "pred_feedback", "backoff"]
out["nearest_neighbour"] = B.nearest_neighbour_baseline(train, test, enc)[cols].values.tolist()
for model in ("logreg", "hgb"):
    clf = F.FeatureClassifier(enc, model=model, feedback="nearest").fit(train)
    out[model] = clf.predict(test)[cols].values.tolist()
    feats = clf._seen_matrix(test, F.l2_normalize(enc(test.provided_answer.tolist())), False)
    out[model + "_features"] = hashlib.sha256(feats.tobytes()).hexdigest()
job = J.with_examples(
    J.TrainJob(examples="", output_dir=sys.argv[1], task="probe", save_model=False,
               settings=dict(model="scratch", max_steps=6, learning_rate=5e-3, batch_size=4,
                             scratch_vocab_size=80, scratch_d_model=16, scratch_heads=2,
                             scratch_ff=32, scratch_layers=1, max_source_length=32,
                             max_target_length=8)),
    J.Examples(list(train.id), list(train.provided_answer), list(train.verification_feedback)),
    {"test": J.Examples(list(test.id), list(test.provided_answer),
                        list(test.verification_feedback))})
res = J.run_jobs([job], log=lambda line: None)
out["seq2seq_loss"] = repr(float(res.logs.train_loss.iloc[0]))
out["seq2seq"] = res.predictions.output.tolist()
print("PROBE " + json.dumps(out))
"""

#: What another machine may differ in, as far as one machine can act it out: MKL limited to
#: AVX2, torch's vector kernels and OpenBLAS's kernel of another processor, one thread.
OTHER_MACHINE = {"MKL_ENABLE_INSTRUCTIONS": "AVX2", "ATEN_CPU_CAPABILITY": "default",
                 "OPENBLAS_CORETYPE": "Sandybridge", "OMP_NUM_THREADS": "1",
                 "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _probe(tmp: Path, extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in (*OTHER_MACHINE, *determinism.KERNEL_ENV, "SAF_NUMERICS", "SAF_NUM_THREADS")}
    env.update({"PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false",
                "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                **extra})
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tmp)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("PROBE ")]
    assert line, proc.stdout[-2000:]
    return json.loads(line[-1][len("PROBE "):])


@pytest.mark.slow
@pytest.mark.skipif(not determinism.has_avx2(), reason="the pinned kernels need AVX2")
def test_systems_give_identical_outputs_under_two_numeric_settings(tmp_path):
    """Embeddings, features, nearest neighbour, both feature classifiers and a seq2seq
    training run are bit-identical with this machine's kernels and threads and with
    another processor's (acted out by OTHER_MACHINE); before numerics, the embeddings and
    features already differed."""
    a = _probe(tmp_path / "a", {})
    b = _probe(tmp_path / "b", OTHER_MACHINE)
    assert a == b


def test_training_threads_fix_the_count_and_restore_it(monkeypatch):
    import torch

    monkeypatch.delenv("SAF_NUMERICS", raising=False)
    monkeypatch.delenv("SAF_TRAIN_THREADS", raising=False)
    before = torch.get_num_threads()
    with determinism.training_threads() as n:
        assert n == determinism.TRAIN_THREADS == torch.get_num_threads()
    assert torch.get_num_threads() == before
    # a model or scorer first loaded inside the block pins threads again: to the block's
    # count, not SAF_NUM_THREADS (BERTScore's last bits moved with SAF_NUM_THREADS: its
    # scorer, loaded inside the block, had undone it)
    monkeypatch.setenv("SAF_NUM_THREADS", "2")
    with determinism.training_threads() as n:
        determinism.pin_threads()
        assert torch.get_num_threads() == n == determinism.TRAIN_THREADS
    assert torch.get_num_threads() == before
    determinism.pin_threads()
    assert torch.get_num_threads() == 2
    torch.set_num_threads(before)
    monkeypatch.setenv("SAF_TRAIN_THREADS", "two")
    with pytest.raises(ValueError, match="SAF_TRAIN_THREADS='two'"):
        determinism.train_threads()
    monkeypatch.setenv("SAF_NUMERICS", "native")
    with determinism.training_threads() as n:
        assert n == 0 and torch.get_num_threads() == before


TRAIN_PROBE = r"""
import json, os, sys
import pandas as pd
from saf_utils.training import jobs as J
from saf_utils import determinism
determinism.pin()
data = os.path.join(os.environ["SAF_DATA"], "data")
train = pd.read_parquet(os.path.join(data, "train-00000-of-00001.parquet")).head(400)
job = J.with_examples(
    J.TrainJob(examples="", output_dir=sys.argv[1], task="probe", save_model=False,
               settings=dict(model="scratch", max_steps=30, learning_rate=2e-3, batch_size=16,
                             max_source_length=192, max_target_length=64)),
    J.Examples(list(train.id), list(train.provided_answer), list(train.answer_feedback)),
    {"test": J.Examples(list(train.id[:8]), list(train.provided_answer[:8]),
                        list(train.answer_feedback[:8]))})
res = J.run_jobs([job], log=lambda line: None)
print("PROBE " + json.dumps([repr(float(res.logs.train_loss.iloc[0])),
                             res.predictions.output.tolist()]))
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("SAF_DATA"), reason="needs SAF_DATA (real answers)")
def test_a_model_trained_on_one_or_two_threads_is_the_same_model(tmp_path):
    """Training reductions split by thread: without training_threads the loss of this probe
    (a scratch T5 of the cpu profile's size, 30 steps on 400 real answers) differs between
    SAF_NUM_THREADS 1 and 2, as the cpu profile's scratch T5 models did."""
    out = []
    for n in ("1", "2"):
        env = {k: v for k, v in os.environ.items()
               if k not in ("SAF_NUMERICS", "SAF_TRAIN_THREADS", "OMP_NUM_THREADS")}
        env.update({"PYTHONPATH": str(ROOT), "SAF_NUM_THREADS": n, "TQDM_DISABLE": "1",
                    "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"})
        proc = subprocess.run([sys.executable, "-c", TRAIN_PROBE, str(tmp_path / n)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out.append([x for x in proc.stdout.splitlines() if x.startswith("PROBE ")][-1])
    assert out[0] == out[1]


RANDOMIZATION_PROBE = r"""
import numpy as np
from saf_utils.statistics import uncertainty as S
rng = np.random.default_rng(3)
b = -0.3 * rng.random(700) - 0.1
a = b + rng.normal(-0.26, 0.05, 700)
r = S.paired_randomization(a, b, n_resamples=1000, seed=0, max_resamples=20000)
print("PROBE", repr((r.low, r.high, r.p_value)))
"""


@pytest.mark.slow  # two subprocesses, one per OpenBLAS kernel
def test_randomization_intervals_do_not_follow_the_blas_kernel():
    """The null's sums are matrix products: OpenBLAS's SkylakeX kernel moved this interval
    by about 1e-16 against Haswell's before they were rounded (as in the cpu profile, where
    one MoverScore interval of 02 differed between two cpu runs under the two kernels:
    docs/reproducibility.md)."""
    outs = set()
    for core in ("Haswell", "SkylakeX"):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_CORETYPE": core}
        proc = subprocess.run([sys.executable, "-c", RANDOMIZATION_PROBE], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.add([x for x in proc.stdout.splitlines() if x.startswith("PROBE")][-1])
    assert len(outs) == 1, outs
