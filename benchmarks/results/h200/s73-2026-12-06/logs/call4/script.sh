# s73 call 4 (either card; carry [".whl"]; ~8.5 min), on the float32_precision tree (default "tf32x3").
# (1) The float32 GPU tests (call4/ids.txt: test_precision.py's GPU cases in both frontends, and
#     every float32 GPU test, now on tf32x3 by default): 8 processes, 200 s, failures again 40 s.
# (2) precision_probe.py at D = 128 / 192 / 256 (call 3 timed D = 64 / 128 by edited trees):
#     offline (Triton 3.6, sm_90) tf32x3 spills 0.8-9 KB at D = 192 where ieee spills 1-7.8 KB:
#     is tf32x3 still ahead of ieee there? Predicted: yes at D = 128 (3-5x), unclear at 192 / 256.
set -u
L=benchmarks/results/h200/s73-2026-12-06/logs
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 200 --rerun-failed 40 --ids $L/call4/ids.txt \
  --log $OUT/tests.log > $OUT/tests_summary.log 2>&1; echo "tests rc $?"
date -u +%H:%M:%S
timeout -s INT -k 5 270 python3 $L/call4/precision_probe.py --d 128 192 256 > $OUT/probe.log 2>&1; echo "probe rc $?"
date -u +%H:%M:%S
tail -n 14 $OUT/tests_summary.log
grep "^|" $OUT/probe.log | cut -c1-250
