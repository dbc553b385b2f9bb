"""The gpu profile's device check, on tiny stand-ins of its models (``tests/standins.py``).

Run by ``benchmarks/gpu_check.sh`` on a machine with CUDA GPUs, in well under 10 minutes:

1. mixed-precision training and decoding of each architecture the profile fine-tunes
   (mBART and LED in fp16, mT5 in fp32 as the profile sets it, XLM-R as a cross-encoder
   in fp16): each job must log the precision it was asked for and decode every input;
2. DDP over NCCL on every visible GPU (``torchrun:gpu``): the first step's loss equals the
   single-process loss on the same examples (the parity the CPU tests check with gloo).

Without CUDA the same checks run in fp32 on the CPU (``torchrun:2``, gloo), so that the
script itself is exercised anywhere; its lines then say so. Prints one line per check and
exits 1 if any failed.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from saf_utils.training import jobs as J  # noqa: E402
from tests.conftest import fixture_texts  # noqa: E402
from tests.standins import build_standin  # noqa: E402

LABELS = ["Correct", "Incorrect", "Partially correct"]
#: hub id -> (job kind, settings of the profile that matter on a device)
CHECKS = {
    "facebook/mbart-large-cc25": ("seq2seq", {"src_lang": "de_DE", "tgt_lang": "de_DE",
                                              "fp16": True, "grad_accum": 4, "batch_size": 1}),
    "google/mt5-base": ("seq2seq", {"fp16": False, "learning_rate": 3e-4}),
    "allenai/led-base-16384": ("seq2seq", {"fp16": True, "num_beams": 4,
                                           "max_source_length": 1024}),
    "xlm-roberta-base": ("cross_encoder", {"fp16": True, "cache_frozen": False,
                                           "freeze_layers": 0, "labels": LABELS}),
}


def examples(folder: Path, kind: str, n: int = 16) -> str:
    texts = fixture_texts()
    sources = [texts[i % len(texts)][:200] for i in range(n)]
    targets = (["Die Antwort ist richtig."] * n if kind == "seq2seq"
               else [LABELS[i % 3] for i in range(n)])
    pairs = ([texts[(i + 7) % len(texts)][:200] for i in range(n)] if kind != "seq2seq"
             else None)
    train = J.Examples(list(range(n)), sources, targets, pairs)
    evals = {"test": J.Examples(list(range(n)), sources, targets, pairs)}
    return str(J.write_examples(folder / "examples.jsonl", train, evals))


def job(tmp: Path, hub_id: str, model: Path, name: str, cuda: bool, n: int = 16,
        parity: bool = False, **extra) -> J.TrainJob:
    """One job of the check; ``parity``: one optimizer step on ``n`` examples in fp32."""
    kind, settings = CHECKS[hub_id]
    settings = {**settings, "model": str(model), "logging_steps": 1, "batch_size": 4,
                **extra}
    settings["fp16"] = settings.get("fp16", False) and cuda and not parity
    if kind == "seq2seq":
        settings.update(max_steps=1 if parity else 4, max_target_length=16)
        if parity:
            settings["grad_accum"] = 1
    else:
        settings.update(epochs=1, max_length=64)
    return J.TrainJob(examples=examples(tmp / name, kind, n), output_dir=str(tmp / name),
                      kind=kind, settings=settings, seed=3, save_model=False)


def first_loss(result: J.JobResult) -> float:
    return next(h["loss"] for h in result.log["log_history"] if "loss" in h)


def main() -> int:
    import torch

    cuda = torch.cuda.is_available()
    n_gpu = torch.cuda.device_count() if cuda else 0
    ddp = "torchrun:gpu" if cuda else "torchrun:2"
    print(f"device: {torch.cuda.get_device_name(0) if cuda else 'CPU (no CUDA)'}; "
          f"{n_gpu} GPU(s); DDP launcher {ddp}; torch {torch.__version__}", flush=True)
    failures = 0
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        for hub_id, (kind, settings) in CHECKS.items():
            model = build_standin(hub_id, fixture_texts(),
                                  tmp / "models" / hub_id.replace("/", "-"))
            want = "fp16" if settings.get("fp16") and cuda else "fp32"
            t0 = time.perf_counter()
            res = J.run_job(job(tmp, hub_id, model, f"{kind}-{want}", cuda),
                            log=lambda m: None)
            decoded = len(res.predictions)
            ok = res.log["summary"]["precision"] == want and decoded == 16
            print(f"{'ok  ' if ok else 'FAIL'} {hub_id}: {kind} trained and decoded in "
                  f"{res.log['summary']['precision']} (asked {want}), {decoded} outputs, "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
            failures += not ok
            if kind == "seq2seq" and hub_id != "facebook/mbart-large-cc25":
                continue  # one seq2seq and the cross-encoder: the two Trainer paths
            # DDP parity: n examples, one step; each process takes n / world of them
            world = n_gpu if cuda else 2
            per = max(1, 4 // world)
            n = per * world
            one = J.run_job(job(tmp, hub_id, model, "one", cuda, n, True, batch_size=n),
                            log=lambda m: None)
            many = J.run_job(job(tmp, hub_id, model, "ddp", cuda, n, True, batch_size=per),
                             launcher=ddp, log=lambda m: None)
            a, b = first_loss(one), first_loss(many)
            ok = abs(a - b) <= 1e-3 * abs(a) and many.log["summary"]["world_size"] == world
            print(f"{'ok  ' if ok else 'FAIL'} {hub_id}: DDP over {world} processes "
                  f"({'NCCL' if cuda else 'gloo'}) first-step loss {b:.5f} vs one process "
                  f"{a:.5f}", flush=True)
            failures += not ok
    print(json.dumps({"checks_failed": failures}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
