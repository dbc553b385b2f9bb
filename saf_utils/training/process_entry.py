"""``python -m saf_utils.training.process_entry CONFIG``: run one
:class:`saf_utils.training.jobs.TrainJob`, what ``torchrun`` and ``accelerate launch`` start per
process: join the process group, train, and on failure write the rank's exception to
``<output_dir>/rank<k>.error`` for the launcher's caller."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from saf_utils.training import jobs as J
from saf_utils.training import launchers
from saf_utils.training.seq2seq import dist_rank_world

#: Test hook: the rank named here raises right after joining the process group.
FAIL_ENV = "SAF_TRAIN_FAIL_RANK"


def _init_distributed() -> tuple[int, int]:
    """Join the launcher's process group (NCCL on GPU, gloo on CPU) here, not in the
    Trainer, so that data loading and generation know the rank; (rank, world size)."""
    import torch
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist_rank_world()


def _write_rank_error(out: Path, rank: int, exc: BaseException) -> None:
    """``rank<k>.error``: the launcher's caller reads the earliest one as the root cause."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"rank{rank}.error").write_text(json.dumps({
            "rank": rank, "time": time.time(), "type": type(exc).__name__, "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc))}))
    except OSError:
        pass  # never hide the original exception behind a reporting problem


#: Exit status of a job whose config or examples file is refused before training.
EXIT_BAD_JOB = 2


def _main(argv: Sequence[str] | None = None) -> int:
    if launcher := os.environ.get("SAF_LAUNCHER_PID"):  # a rank dies with its launcher
        launchers.die_with_parent(int(launcher))
    parser = argparse.ArgumentParser(prog="python -m saf_utils.training.process_entry",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="job config (YAML or JSON; fields of TrainJob)")
    args = parser.parse_args(argv)
    try:  # every setting and the examples file, before a process group is joined
        job = J.TrainJob.load(args.config)
        J.read_examples(job.examples)
    except (OSError, ValueError, TypeError) as exc:
        print(f"python -m saf_utils.training.process_entry: {' '.join(str(exc).split())}",
              file=sys.stderr)
        return EXIT_BAD_JOB
    rank = int(os.environ.get("RANK", "0"))
    try:
        rank, world = _init_distributed()
        if os.environ.get(FAIL_ENV) == str(rank):
            raise RuntimeError(f"injected failure on rank {rank} ({FAIL_ENV})")
        J.train_job(job, log=lambda m: print(m, flush=True))
        if world > 1:
            import torch.distributed as dist

            dist.barrier()  # rank 0 has written everything before any process exits
            dist.destroy_process_group()
    except BaseException as exc:
        _write_rank_error(Path(job.output_dir), rank, exc)
        raise
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; under torchrun ``record`` also puts the traceback in its summary."""
    from torch.distributed.elastic.multiprocessing.errors import record

    return record(_main)(argv)


if __name__ == "__main__":
    sys.exit(main())
