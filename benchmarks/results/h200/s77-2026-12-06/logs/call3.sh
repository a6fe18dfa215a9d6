# s77 call 3 (H100; carry [".whl"]): (1) the float32 GPU tests on tf32x3's new D = 128 dK/dV tile
# (64 x 32 / 8, one stage); (2) one stage for the other precisions' dK/dV and at D = 64 (probe now
# replaces the precision's own table entry).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
L=benchmarks/results/h200/s77-2026-12-06/logs
python3 scripts/gpu_tests.py --processes 6 --deadline 200 --rerun-failed 40 --ids $L/call3.ids --log $OUT/tests_f32.log 2>&1 | tail -7
date -u +%H:%M:%S
for a in "tf32x3 head 128" "bf16x3 head 128" "bf16x3 k=64,32,8,1 128" "tf32 head 128" "tf32 k=64,32,8,1 128" \
         "tf32x3 head 64" "tf32x3 k=64,32,8,1 64" "bf16x3 head 64" "bf16x3 k=64,32,8,1 64"; do
  set -- $a
  timeout 60 python3 $L/tile_probe.py $1 "$2" "$2" $3 2>&1 | grep "^|" | tee -a $OUT/probe.md
done
date -u +%H:%M:%S
