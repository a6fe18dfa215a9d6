# s78 call 1 (s77's next_call1.sh as prepared; carry [".whl"]).
# (1) tune.py --dtype float32 (new in s77, run only on the CPU so far): tf32x3's tiles per kernel at
#     D = 128 and 256, B*N = 16k, H*D = 2048, N = 2048, causal and not. s77's hand probe found 12-25%
#     in two tiles the offline spill counts had ruled out; this sweeps every neighbour. Winners are
#     printed as FLOAT32_PRECISION_TILES entries: copy by hand, after a probe of forward + backward.
# (2) on an H200 only: issue 5's D = 64 1k causal forward cell (1.496x FA2 in s74, 1.514x in s75).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
mkdir -p $OUT/tune32 $OUT/fwd
timeout -s INT -k 10 330 python3 benchmarks/tune.py --dtype float32 --float32-precision tf32x3 --d 128 256 --n 2048 \
  --workers 14 --compile-s 150 --budget-s 300 --out $OUT/tune32 > $OUT/tune32/log.txt 2>&1; echo "tune rc $?"
date -u +%H:%M:%S
case "$G" in *H200*)
  timeout -s INT -k 10 90 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
    --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
  grep "^|" $OUT/fwd/forward.md | head -3;;
esac
date -u +%H:%M:%S
grep -A12 '```python' $OUT/tune32/tune.md; grep "best" $OUT/tune32/tune.md | cut -d'|' -f2-8
