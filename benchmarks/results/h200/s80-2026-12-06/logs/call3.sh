# s80 call 3 (any card; carry [".whl"]): test_shard_map's GPU case after 8ab9b01 (its dropout check on
# two short sequences); then, on an H200 only, issue 5's D = 64 1k causal forward cell (5 rounds).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
python3 -m pytest -q -m gpu tests/test_jax.py -k shard_map -p no:cacheprovider 2>&1 | tail -2
date -u +%H:%M:%S
case "$G" in *H200*)
  mkdir -p $OUT/fwd
  timeout -s INT -k 10 120 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
    --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
  grep "^|" $OUT/fwd/forward.md | head -4;;
esac
date -u +%H:%M:%S
