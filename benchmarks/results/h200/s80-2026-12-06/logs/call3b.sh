# s80 call 3b (any card; carry [".whl"]): call3.sh cut to what the session's last device time fits:
# test_jax.py's GPU tests after this session's test changes (8ab9b01 / 2dcda96), 8 processes.
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 220 --rerun-failed 40 \
  --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_jax.log -m gpu tests/test_jax.py 2>&1 | tail -10
date -u +%H:%M:%S
