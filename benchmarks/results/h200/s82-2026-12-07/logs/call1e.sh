# s82, the last budget (~250 s) after failed starts; carry [".whl"]. On an H200: issue 5's two open
# cells (s74 call 3's commands: D = 128 1k backward, D = 64 1k causal forward). On another card:
# the GPU suite with a 130 s deadline (it lists what it did not reach).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
if [[ "$G" == *H200* ]]; then
  mkdir -p $OUT/bwd $OUT/fwd
  timeout -s INT -k 10 100 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
    --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
  timeout -s INT -k 10 80 python3 benchmarks/bench_backward.py --d 128 --n 1024 --rounds 3 --no-memory \
    --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/bwd > $OUT/bwd/bwd.log 2>&1; echo "bwd rc $?"
  grep "^|" $OUT/fwd/forward.md | head -4; grep "^|" $OUT/bwd/backward.md | head -8
else
  python3 scripts/gpu_tests.py --processes 8 --deadline 130 --rerun-failed 20 \
    --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
    --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -12
fi
date -u +%H:%M:%S
