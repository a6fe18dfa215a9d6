# s82: call1.sh with a 220 s deadline (the last budget after failed starts; it lists what it did not reach); carry [".whl"].
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 220 --rerun-failed 60 \
  --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -12
date -u +%H:%M:%S
