# Prepared in s82 for the next session's first call (~8 min; carry [".whl"]). It branches on the
# card that comes: on an H200, issue 5's cells and the D = 64 window checks (s81's next_call2.sh);
# on any other card, the whole GPU suite (s81's next_call1.sh). Then next_call2.sh runs the other
# half (the suite) if the first call got an H200. No GPU ran in s81's last hour or in s82.
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
if [[ "$G" != *H200* ]]; then
  python3 scripts/gpu_tests.py --processes 8 --deadline 440 --rerun-failed 60 \
    --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
    --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -12
  date -u +%H:%M:%S; exit 0
fi
mkdir -p $OUT/fwd $OUT/bwd $OUT/w64
timeout -s INT -k 10 120 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
grep "^|" $OUT/fwd/forward.md | head -4
date -u +%H:%M:%S
timeout -s INT -k 10 200 python3 benchmarks/bench_backward.py --d 128 --n 1024 --rounds 3 \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/bwd > $OUT/bwd/bwd.log 2>&1; echo "bwd rc $?"
grep "^|" $OUT/bwd/backward.md | head -8
date -u +%H:%M:%S
timeout -s INT -k 10 100 python3 benchmarks/bench_variants.py --quick --d 64 --cases window --out $OUT/w64 \
  > $OUT/w64/variants.log 2>&1; echo "variants rc $?"
grep "^|" $OUT/w64/variants.md | head -3
rm -rf /tmp/tl64; mkdir -p /tmp/tl64; cp -r src /tmp/tl64/
sed -i '/^    (64, "window"): "pp-tma-persist-ovl-ts",$/d' /tmp/tl64/src/flashx/core/tuning.py
grep -c '(64, "window")' /tmp/tl64/src/flashx/core/tuning.py
timeout -s INT -k 10 150 python3 benchmarks/ab.py tl=/tmp/tl64/src gluon=src --cases variants-d \
  --only "fwd window B1 N16384 H32 D64" --rounds 3 --control > $OUT/w64/ab.log 2>&1; echo "ab rc $?"
tail -4 $OUT/w64/ab.log
date -u +%H:%M:%S
