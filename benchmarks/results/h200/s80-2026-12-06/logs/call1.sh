# Prepared in s79 for the next session (any card, prefer an H200; ~7 min; carry [".whl"]): the whole
# GPU-marked suite on the final code (s79: its float32 work has never run on an H200); then, on an H200 only, issue 5's D = 64 1k
# causal forward cell.
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 440 --rerun-failed 60 \
  --balance benchmarks/results/h200/s79-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -12
date -u +%H:%M:%S
case "$G" in *H200*)
  mkdir -p $OUT/fwd
  timeout -s INT -k 10 60 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
    --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
  grep "^|" $OUT/fwd/forward.md | head -3;;
esac
date -u +%H:%M:%S
