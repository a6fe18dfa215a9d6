# Prepared in session 59: the sweeps with the suite's in-turns JAX/torch timing (never yet run on
# the GPU), on whatever kernels main has by then. ~6 min.
set -u
date -u +%H:%M:%S
R=/tmp/s60c2; mkdir -p $R/fwd
timeout -s TERM 340 python3 benchmarks/bench_forward.py --quick --budget-s 330 --d 64 128 256 \
  --n 1024 4096 16384 --out $R/fwd > $R/fwd-sweep.log 2>&1; echo "fwd rc $?"
date -u +%H:%M:%S
tar -czf $OUT/call2.tar.gz -C $R .
grep -A14 "^| D" $R/fwd/forward.md | head -16
