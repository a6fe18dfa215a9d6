# s79 call 2 = s78's next_call1.sh (prepared in s78, not run there: its device time
# ran out. On the final code: tf32x3's D = 128 tiles (dK/dV 32 x 32 / 4 / 1, dQ 32 x 32 / 4 / 2) with
# FLOAT32_FEW_PROGRAMS_TILES (dK/dV 64 x 32 / 8 / 1 where its grid is under 4 waves of SMs).
# (1) bench_float32.py --tiles (new in s78: named tiles beside the tables' in one process, placed
#     at every grid size) at 256 / 512 / 768 / 1024 dK/dV programs (B = 2, 4, 6, 8; 8 q heads over
#     2) and at B = 8, 16 heads: the table ("flashx tf32x3": the rule takes the small-grid dK/dV
#     at 256 and 512) beside either dK/dV named, to place the 4-wave threshold (s78 timed only
#     256, where the small-grid tile won, and 1024 and more, where the new one did); and the
#     forward at 128 x 32 / 8 / 2 (call 1's sweep: 6.54 / 3.60 ms against the table's 32 x 64 /
#     8 / 2 at 7.51 / 4.10, B = 8, 16 heads; compare the fwd column);
# (2) the 20 float32 GPU tests: test_gpu_float32_dkdv_on_either_grid (new in s78, both sides of the
#     rule) and s77's 18 (whose shapes take the small-grid dK/dV);
# (3) on an H200 only: issue 5's D = 64 1k causal forward cell (1.496x FA2 in s74, 1.514x in s75).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
L=benchmarks/results/h200/s78-2026-12-06/logs
for shape in "2 2048 8 2" "4 2048 8 2" "6 2048 8 2" "8 2048 8 2" "8 2048 16 16"; do
  o=$OUT/f32/$(echo $shape | tr ' ' _); mkdir -p $o
  timeout -s INT -k 10 100 python3 benchmarks/bench_float32.py --quick --d 128 --precisions tf32x3 --no-sdpa \
    --shape $shape --tiles "k=32,32,4,1" "k=64,32,8,1" "f=128,32,8,2" --out $o > $o/log.txt 2>&1; echo "f32 $shape rc $?"
  grep "^| 128" $o/float32.md | cut -d'|' -f2-6
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
