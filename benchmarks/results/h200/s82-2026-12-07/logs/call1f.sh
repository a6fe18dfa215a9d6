# s82, the last budget (~160 s); carry [".whl"]. On an H200: the D = 64 1k causal forward cell
# (s74's command, 5 rounds). On another card: the GPU suite with an 80 s deadline (lists what it did not reach).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
if [[ "$G" == *H200* ]]; then
  mkdir -p $OUT/fwd
  timeout -s INT -k 10 90 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
    --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
  grep "^|" $OUT/fwd/forward.md | head -4
else
  python3 scripts/gpu_tests.py --processes 8 --deadline 80 --rerun-failed 10 \
    --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
    --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -12
fi
date -u +%H:%M:%S
