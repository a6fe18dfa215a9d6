# Prepared in s79 for the next session (any card; ~4 min; carry [".whl"]): bench_float32.py --quick
# on the final code, README's dtypes table again (its D = 128 row is s77's run; s79 moved tf32x3's
# D = 128 forward and made the small-grid rule causal-only), and bf16x3 at D = 128 on a large grid
# (B = 8, 16 heads) beside its forward named 128 x 32 / 8 / 2 (tf32x3's new one; untried for bf16x3).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
mkdir -p $OUT/f32 $OUT/bf16x3
timeout -s INT -k 10 300 python3 benchmarks/bench_float32.py --quick --out $OUT/f32 > $OUT/f32/log.txt 2>&1; echo "f32 rc $?"
grep "^|" $OUT/f32/float32.md | cut -d'|' -f2-6
timeout -s INT -k 10 100 python3 benchmarks/bench_float32.py --quick --d 128 --precisions bf16x3 --no-sdpa \
  --shape 8 2048 16 16 --tiles "f=128,32,8,2" --out $OUT/bf16x3 > $OUT/bf16x3/log.txt 2>&1; echo "bf16x3 rc $?"
grep "^| 128" $OUT/bf16x3/float32.md | cut -d'|' -f2-6
date -u +%H:%M:%S
