# Prepared in s81 for the next session (an H200 for the cells; ~7 min; carry [".whl"]):
# issue 5's D = 64 1k causal forward cell (5 rounds) and D = 128 1k backward cells (3 rounds); the
# D = 64 window 1024 beside FlexAttention; the D = 64 window route against the tl forward in three
# rounds (a tree without the route, as s81's call 3 meant to, cut by its limit).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
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
