# s74 call 4 (carry [".whl"]): the whole GPU-marked suite on 56fc37a (float32_precision "bf16x3"
# and its tiles; the kernels' sources unchanged since s71-s72), 8 processes balanced by s73's
# durations, 470 s, failures again for 60 s.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 470 --rerun-failed 60 \
  --balance benchmarks/results/h200/s73-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests > $OUT/tests_gpu_summary.log 2>&1; echo "tests rc $?"
date -u +%H:%M:%S
gzip -f $OUT/tests_gpu.log
tail -n 20 $OUT/tests_gpu_summary.log
