# Prepared in s81 for the next session (any card, prefer an H200; ~8 min; carry [".whl"]): the whole
# GPU-marked suite on the final code (s81's D = 64 window route: only its window tests have run,
# on an H100; s75-s81's work has never run on an H200).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 440 --rerun-failed 60 \
  --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -12
date -u +%H:%M:%S
