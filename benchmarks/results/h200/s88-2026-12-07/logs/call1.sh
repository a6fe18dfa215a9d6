# s88 call 1: the whole GPU-marked suite on branch dq-store16 (main 2606c6a + the Gluon dQ's and
# cp.async dK/dV's 16-byte stores); any card (~8 min; carry [".whl"]).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 440 --rerun-failed 60 \
  --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -12
date -u +%H:%M:%S
