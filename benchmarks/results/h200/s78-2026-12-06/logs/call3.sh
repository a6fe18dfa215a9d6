# s78 call 3 (~7 min; carry [".whl"]): call 1's tune.py sweep (tf32x3, N = 2048, B = 8, 16 heads)
# put tf32x3's D = 128 dK/dV at 32 x 32 / 4 warps / 1 stage (17.74 -> 15.39 ms non-causal, 8.79
# -> 7.14 causal) and dQ at 32 x 32 / 4 / 2 (10.66 -> 10.00, 5.82 -> 5.08). Run on the working tree
# with both in TF32X3_TILES[256] ("head" below): forward + backward by the probe at s77's GQA shape
# (B = 2, 8 q heads over 2) and at the sweep's (B = 8, 16 heads), against s77's tiles and each
# change alone; then the 18 float32 GPU tests (s77's call3.ids) on the new tiles.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
L=benchmarks/results/h200/s78-2026-12-06/logs
for shape in 2,8,2 8,16,16; do
  for c in head "k=64,32,8,1;q=32,64,8,2" "k=32,32,4,1;q=32,64,8,2" "k=64,32,8,1;q=32,32,4,2" head; do
    PROBE_SHAPE=$shape timeout 60 python3 $L/tile_probe.py tf32x3 "$c" "$c" 128 2>&1 | grep "^|" | tee -a $OUT/probe.md
  done
done
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 6 --deadline 150 --rerun-failed 30 --ids $L/call3.ids --log $OUT/tests_f32.log 2>&1 | tail -7
date -u +%H:%M:%S
