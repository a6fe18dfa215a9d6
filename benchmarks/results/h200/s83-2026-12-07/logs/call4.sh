# s83 call 4 (the session's last try, ~386 s of device time left): on an H200, s81's next_call2.sh
# (issue 5's cells and the D = 64 window route); on any other card, only the D = 128 1k non-causal
# backward beside FlexAttention in 5 rounds (call 2 read it at 0.99x Flex on an H100, 3 rounds).
set -u
if [[ "$(nvidia-smi --query-gpu=name --format=csv,noheader)" == *H200* ]]; then
  exec bash benchmarks/results/h200/s81-2026-12-07/logs/next_call2.sh
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; mkdir -p $OUT/bwd
timeout -s INT -k 10 200 python3 benchmarks/bench_backward.py --d 128 --n 1024 --causal no --rounds 5 \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/bwd > $OUT/bwd/bwd.log 2>&1; echo "bwd rc $?"
grep "^|" $OUT/bwd/backward.md
