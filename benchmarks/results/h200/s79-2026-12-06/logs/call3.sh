# s79 call 3 (any card): the causal-only small-grid rule with tf32x3's D = 128 forward on 128 x 32 /
# 8 / 2 (FLOAT32_FEW_PROGRAMS_TILES keeps 32 x 64 for the causal forward on small grids).
# (1) bench_float32 at three shapes: the table beside the former forward (f=32,64,8,2);
# (2) the 20 float32 GPU tests (test_gpu_float32_tiles_on_either_grid: both sides of the rule).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
L=benchmarks/results/h200/s79-2026-12-06/logs
python3 scripts/gpu_tests.py --processes 6 --deadline 150 --rerun-failed 30 --ids $L/call3.ids --log $OUT/tests_f32.log 2>&1 | tail -7
date -u +%H:%M:%S
for shape in "2 2048 8 2" "4 2048 8 2" "8 2048 16 16"; do
  o=$OUT/f32_$(echo $shape | tr ' ' _); mkdir -p $o
  timeout -s INT -k 10 100 python3 benchmarks/bench_float32.py --quick --d 128 --precisions tf32x3 --no-sdpa \
    --shape $shape --tiles "f=32,64,8,2" --out $o > $o/log.txt 2>&1; echo "f32 $shape rc $?"
  grep "^| 128" $o/float32.md | cut -d'|' -f2-6
done
date -u +%H:%M:%S
