# s67 (prepared for the next session; needs the H200, since its figures are issue 5's): the
# forward sweep with the suite's in-turns JAX/torch timing (v0.51 item 7; never yet run on a GPU),
# every forward cell of the issue on one run; then dropout at D = 128 beside FA2 and cuDNN with
# s67's 32-row dK/dV tile (README's figure is the older tile's). carry [".whl"]; ~9 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
R=/tmp/c1; mkdir -p $R/fwd $R/drop
timeout -s TERM 340 python3 benchmarks/bench_forward.py --quick --budget-s 330 --d 64 128 256 \
  --n 1024 4096 16384 --out $R/fwd > $R/fwd-sweep.log 2>&1; echo "fwd rc $?"
date -u +%H:%M:%S
timeout -s TERM 150 python3 benchmarks/bench_variants.py --quick --cases dropout causal --d 128 --out $R/drop \
  > $R/drop.log 2>&1; echo "dropout rc $?"
date -u +%H:%M:%S
tar -czf $OUT/call1.tar.gz -C $R .
grep -A14 "^| D" $R/fwd/forward.md | head -16; grep "^|" $R/drop/*.md | head -12
