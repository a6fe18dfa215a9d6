# s78 call 4 (~3 min; carry [".whl"]): tf32x3's D = 128 tiles from call 3 (dK/dV 32 x 32 / 4 / 1,
# dQ 32 x 32 / 4 / 2) with FLOAT32_FEW_PROGRAMS_TILES (dK/dV 64 x 32 / 8 / 1 where its grid is
# under 4 waves of SMs). The probe's "head" at 256 / 512 / 1024 dK/dV programs (B = 2, 4, 8; 8 q
# heads over 2); named tiles (the rule off) at 512 and 768 (B = 6) programs, for the threshold;
# then the 18 float32 GPU tests on it (their shapes take the small-grid tile).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
L=benchmarks/results/h200/s78-2026-12-06/logs
for shape in 2,8,2 4,8,2 8,8,2; do
  PROBE_SHAPE=$shape timeout 60 python3 $L/tile_probe.py tf32x3 head head 128 2>&1 | grep "^|" | tee -a $OUT/probe.md
done
for shape in 4,8,2 6,8,2; do
  for c in "k=32,32,4,1" "k=64,32,8,1"; do
    PROBE_SHAPE=$shape timeout 60 python3 $L/tile_probe.py tf32x3 "$c" "$c" 128 2>&1 | grep "^|" | tee -a $OUT/probe.md
  done
done
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 6 --deadline 120 --rerun-failed 30 --ids $L/call3.ids --log $OUT/tests_f32.log 2>&1 | tail -7
date -u +%H:%M:%S
