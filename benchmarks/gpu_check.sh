#!/usr/bin/env bash
# The gpu profile's device check: run on a machine with CUDA GPUs (an 8-GPU node included),
# from the repository root, after `make install TORCH_SPEC=torch` (a CUDA build of torch).
# Offline: every model is a tiny stand-in built here (tests/standins.py); only the data
# copies are read (SAF_DATA, ARGSCICHAT_DATA). Under 10 minutes on one H200-class GPU.
#   1. fp16 training and decoding of mBART, mT5 (fp32, as the profile sets it), LED and the
#      XLM-R cross-encoder; DDP over NCCL on every visible GPU with the single-process loss;
#   2. notebook 02 of the gpu profile (its grids, seeds, languages, lengths; sizes cut) on
#      the stand-ins under their hub ids, with the profile's own launcher, torchrun:gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
export TQDM_DISABLE=1
: "${SAF_DATA:?set SAF_DATA to the local SAF copy}" "${ARGSCICHAT_DATA:?set ARGSCICHAT_DATA}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PY" -c 'import torch; print("cuda:", torch.cuda.is_available(), torch.cuda.device_count(), "GPU(s)")'
start=$SECONDS
"$PY" benchmarks/gpu_check.py
echo "device checks: $((SECONDS - start)) s"
start=$SECONDS
"$PY" - "$work" <<'PYEOF'
import sys
from pathlib import Path
sys.path.insert(0, ".")
from tests.standins import build_standins
from tests.test_gpu_rehearsal import rehearsal_profile, shared_texts
work = Path(sys.argv[1])
build_standins(work / "models", shared_texts(), work / "hub")
rehearsal_profile(work / "gpu-rehearsal.yaml")
PYEOF
launcher=torchrun:gpu
"$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' || launcher=torchrun:2
HF_HUB_CACHE="$work/hub" "$PY" -m saf_utils.run --config "$work/gpu-rehearsal.yaml" \
  --only 02 -p "launcher=$launcher" --reports-dir "$work/reports" --run-name gpu-check
echo "02 of the gpu profile on stand-ins ($launcher): $((SECONDS - start)) s"
