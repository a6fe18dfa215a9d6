# s85 call 3 (carry [".whl"]; ~7 min, any card): the whole GPU-marked suite on the row statistics
# written by dQ (tuning.DQ_ROW_STATS): every backward test on the GPU runs the new order.
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 440 --rerun-failed 60 \
  --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -14
date -u +%H:%M:%S
