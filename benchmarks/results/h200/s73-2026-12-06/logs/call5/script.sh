# s73 call 5 (either card; carry [".whl"]; ~4 min): float32 above D = 128 with "tf32x3"'s backward
# in "ieee" (tuning.backward_dot_precision). (1) The float32 GPU tests above D = 128
# (call5/ids.txt), 7 processes, 150 s. (2) precision_probe.py at D = 192 / 256 for tf32x3 and ieee.
# Predicted: forward + backward ~31 / 44 ms (ieee's backward after tf32x3's faster forward).
set -u
L=benchmarks/results/h200/s73-2026-12-06/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 7 --deadline 150 --ids $L/call5/ids.txt \
  --log $OUT/tests.log > $OUT/tests_summary.log 2>&1; echo "tests rc $?"
date -u +%H:%M:%S
timeout -s INT -k 5 150 python3 $L/call4/precision_probe.py tf32x3 ieee --d 192 256 > $OUT/probe.log 2>&1; echo "probe rc $?"
date -u +%H:%M:%S
tail -n 9 $OUT/tests_summary.log
grep "^|" $OUT/probe.log | cut -c1-250
