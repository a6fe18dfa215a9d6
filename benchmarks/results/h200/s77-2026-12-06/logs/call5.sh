# s77 call 5 (H100; carry [".whl"]): tf32x3 at D = 256 (width 512) with dK/dV and dQ on one stage, against
# the two-stage tiles; bf16x3 (which took the same tiles) on both; the D > 128 float32 GPU tests on it.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
L=benchmarks/results/h200/s77-2026-12-06/logs
python3 scripts/gpu_tests.py --processes 6 --deadline 150 --rerun-failed 30 --ids $L/call5.ids --log $OUT/tests_f32.log 2>&1 | tail -7
for a in "tf32x3 head 256" "tf32x3 k=16,16,4,2;q=16,32,4,2 256" "bf16x3 head 256" "bf16x3 k=16,16,4,1;q=16,32,4,1 256" "tf32x3 head 256"; do
  set -- $a
  timeout 60 python3 $L/tile_probe.py $1 "$2" "$2" $3 2>&1 | grep "^|" | tee -a $OUT/probe.md
done
date -u +%H:%M:%S
