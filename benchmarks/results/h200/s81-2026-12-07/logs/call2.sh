# s81 call 2 (any card; ~5 min; carry [".whl"]): tf32x3 D = 128 at B = 5 (640 dK/dV and forward
# programs, between s79's 512 and 768) with the small- and large-grid tiles named, to place the
# small-grid threshold (4 waves = 528 programs now); then, on an H200 only, issue 5's D = 64 1k
# causal forward cell (5 rounds) and the D = 128 1k backward cells (3 rounds).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
o=$OUT/f32_b5; mkdir -p $o
timeout -s INT -k 10 100 python3 benchmarks/bench_float32.py --quick --d 128 --precisions tf32x3 --no-sdpa \
  --shape 5 2048 8 2 --tiles "k=32,32,4,1" "k=64,32,8,1" "f=128,32,8,2" "f=32,64,8,2" --out $o > $o/log.txt 2>&1; echo "f32 B=5 rc $?"
grep "^| 128" $o/float32.md | cut -d'|' -f2-6
date -u +%H:%M:%S
case "$G" in *H200*)
  mkdir -p $OUT/fwd $OUT/bwd
  timeout -s INT -k 10 120 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
    --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
  grep "^|" $OUT/fwd/forward.md | head -4
  date -u +%H:%M:%S
  timeout -s INT -k 10 200 python3 benchmarks/bench_backward.py --d 128 --n 1024 --rounds 3 \
    --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/bwd > $OUT/bwd/bwd.log 2>&1; echo "bwd rc $?"
  grep "^|" $OUT/bwd/backward.md | head -8;;
esac
date -u +%H:%M:%S
