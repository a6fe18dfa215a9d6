# s85 call 7 (carry [".whl"]; <= 3 min, the session's last 270 s of device time): the D = 128 1k
# backward beside the peers on this session's code (dQ's row statistics), two rounds, any card
# (the non-causal cell's FlexAttention margin, 0.99-1.02 before); on an H200 also the D = 64 1k
# causal forward cell, time permitting.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
mkdir -p $OUT/bwd $OUT/fwd
timeout -s INT -k 5 120 python3 benchmarks/bench_backward.py --d 128 --n 1024 --rounds 2 \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/bwd > $OUT/bwd/bwd.log 2>&1; echo "bwd rc $?"
grep "^|" $OUT/bwd/backward.md | head -8 | cut -c1-250
date -u +%H:%M:%S
if [[ "$name" == *H200* ]]; then
  timeout -s INT -k 5 60 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 3 \
    --systems flashx_torch sdpa_flash --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
  grep "^|" $OUT/fwd/forward.md | head -4 | cut -c1-250
fi
date -u +%H:%M:%S
