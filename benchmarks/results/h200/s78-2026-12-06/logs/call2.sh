# s78 call 2 (~9 min; carry [".whl"]): the whole GPU-marked suite on HEAD (s77's float32 tiles and
# tune.py's float32 sweep have run only their own GPU tests, on an H100).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 440 --rerun-failed 60 \
  --balance benchmarks/results/h200/s77-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -8
date -u +%H:%M:%S
