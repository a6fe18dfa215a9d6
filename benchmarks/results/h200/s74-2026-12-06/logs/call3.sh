# s74 call 3 (H200, warm from call 2): issue 5's open cells, call 1's first two parts again on the H200.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
mkdir -p $OUT/bwd $OUT/fwd
timeout -s INT -k 10 150 python3 benchmarks/bench_backward.py --d 128 --n 1024 --rounds 3 --no-memory \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/bwd > $OUT/bwd/bwd.log 2>&1; echo "bwd rc $?"
timeout -s INT -k 10 100 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/bwd/backward.md | head -8; grep "^|" $OUT/fwd/forward.md | head -4
