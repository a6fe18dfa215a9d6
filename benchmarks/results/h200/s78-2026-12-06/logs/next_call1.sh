# s78 (prepared for the next session; any card, ~5 min; carry [".whl"]). Not run: s78's device time
# ran out. tf32x3's D = 128 tiles (dK/dV 32 x 32 / 4 / 1, dQ 32 x 32 / 4 / 2) with
# FLOAT32_FEW_PROGRAMS_TILES (dK/dV 64 x 32 / 8 / 1 where its grid is under 4 waves of SMs):
# (1) the probe's "head" at 256 / 512 / 1024 dK/dV programs (B = 2, 4, 8; 8 q heads over 2: the
#     rule takes the small-grid tile at the first two); the named tiles (the rule off) at 512 and
#     768 (B = 6) programs, to place the threshold (s78 measured only 256, where the small-grid tile
#     won, and 1024 and more, where the new one did);
# (1b) tf32x3's D = 128 forward at 128 x 32 / 8 / 2: call 1's sweep read it 6.54 / 3.60 ms (non-causal /
#     causal, B = 8, 16 heads) against the table's 32 x 64 / 8 / 2 at 7.51 / 4.10; not probed in s78
#     (compare the probe's fwd column with "head"'s at the same shape);
# (2) the 20 float32 GPU tests: test_gpu_float32_dkdv_on_either_grid (new in s78, both sides of the
#     rule) and s77's 18 (whose shapes take the small-grid dK/dV);
# (3) on an H200 only: issue 5's D = 64 1k causal forward cell (1.496x FA2 in s74, 1.514x in s75).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
L=benchmarks/results/h200/s78-2026-12-06/logs
for shape in 2,8,2 4,8,2 8,8,2; do
  PROBE_SHAPE=$shape timeout 60 python3 $L/tile_probe.py tf32x3 head head 128 2>&1 | grep "^|" | tee -a $OUT/probe.md
done
for shape in 4,8,2 6,8,2; do
  for c in "k=32,32,4,1" "k=64,32,8,1"; do
    PROBE_SHAPE=$shape timeout 60 python3 $L/tile_probe.py tf32x3 "$c" "$c" 128 2>&1 | grep "^|" | tee -a $OUT/probe.md
  done
done
for shape in 2,8,2 8,16,16; do
  PROBE_SHAPE=$shape timeout 60 python3 $L/tile_probe.py tf32x3 "f=128,32,8,2" "f=128,32,8,2" 128 2>&1 | grep "^|" | tee -a $OUT/probe.md
done
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 6 --deadline 120 --rerun-failed 30 --ids $L/next_call1.ids --log $OUT/tests_f32.log 2>&1 | tail -7
date -u +%H:%M:%S
case "$G" in *H200*)
  mkdir -p $OUT/fwd
  timeout -s INT -k 10 90 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
    --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
  grep "^|" $OUT/fwd/forward.md | head -3;;
esac
date -u +%H:%M:%S
