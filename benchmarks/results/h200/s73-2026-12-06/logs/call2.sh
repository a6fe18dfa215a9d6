# s73 call 2 (either card; carry [".whl"]; ~8.5 min).
# (1) Call 1's 25 unreached GPU tests (call2-ids.txt), 6 processes (call 1's 12 made the
#     compiles contend: 2861 s of tests against s70's 1611), 280 s, failures again for 50 s.
# (2) The D = 128 1k backward beside the peers, 3 rounds (issue 5's open cell: 1k causal).
set -u
L=benchmarks/results/h200/s73-2026-12-06/logs
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 6 --deadline 280 --rerun-failed 50 --ids $L/call2-ids.txt \
  --balance $L/call1/tests_gpu.durations.json --log $OUT/tests_gpu.log > $OUT/tests_gpu_summary.log 2>&1
echo "gpu tests rc $?"
date -u +%H:%M:%S
mkdir -p $OUT/bwd
timeout -s INT -k 10 190 python3 benchmarks/bench_backward.py --d 128 --n 1024 --rounds 3 --no-memory \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/bwd > $OUT/bwd/bwd.log 2>&1; echo "bwd rc $?"
date -u +%H:%M:%S
tail -n 12 $OUT/tests_gpu_summary.log
grep "^|" $OUT/bwd/backward.md | head -30
