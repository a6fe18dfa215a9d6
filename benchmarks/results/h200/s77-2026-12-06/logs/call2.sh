# s77 call 2 (H100; carry [".whl"]): (1) the 36 tests call 1's 330 s deadline left unreached, on HEAD;
# (2) call 1's dK/dV candidates for tf32x3 at D = 128 again, beside HEAD, plus two neighbours.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
L=benchmarks/results/h200/s77-2026-12-06/logs
python3 scripts/gpu_tests.py --processes 8 --deadline 300 --rerun-failed 40 --ids $L/call1/tests_gpu.unreached.txt \
  --log $OUT/tests_gpu.log 2>&1 | tail -6
date -u +%H:%M:%S
for c in head "k=64,32,8,2" "k=64,32,4,2" "k=32,32,4,2" head "k=64,32,8,2" "k=64,32,8,1"; do
  timeout 60 python3 $L/tile_probe.py tf32x3 "$c" "$c" 128 2>&1 | grep "^|" | tee -a $OUT/probe.md
done
date -u +%H:%M:%S
