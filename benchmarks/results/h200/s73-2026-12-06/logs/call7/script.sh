# s73 call 7 (either card; carry [".whl"]; ~2 min): "tf32x3" above D = 128 on its own backward tiles
# (tuning.TF32X3_BACKWARD_TILES, from call 6's probe) instead of an "ieee" backward: the float32
# GPU tests above D = 128 (call5/ids.txt) and precision_probe.py at D = 192 / 256 for tf32x3.
# Predicted: forward + backward ~10 / ~20 ms causal / non-causal (call 6).
set -u
L=benchmarks/results/h200/s73-2026-12-06/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 7 --deadline 120 --ids $L/call5/ids.txt \
  --log $OUT/tests.log > $OUT/tests_summary.log 2>&1; echo "tests rc $?"
timeout -s INT -k 5 100 python3 $L/call4/precision_probe.py tf32x3 --d 192 256 > $OUT/probe.log 2>&1; echo "probe rc $?"
date -u +%H:%M:%S
tail -n 9 $OUT/tests_summary.log
grep "^|" $OUT/probe.log | cut -c1-250
