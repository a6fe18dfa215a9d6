# s67 call 4: the whole GPU-marked suite on 5c834a4 (the placeholder of absent inputs without
# elements, 45084f6, reaches every launch), split by s66 call 3's durations, failures rerun alone.
# carry [".whl"]; ~8 min.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 380 --rerun-failed 60 \
  --balance benchmarks/results/h200/s66-2026-12-05/logs/call3-tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests > $OUT/tests_gpu_summary.log 2>&1
echo "gpu tests rc $?"
date -u +%H:%M:%S
tail -n 14 $OUT/tests_gpu_summary.log
