set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
R=/tmp/s58c1; mkdir -p $R/fwd $R/short $R/var
date -u +%H:%M:%S
timeout -s TERM 340 python3 benchmarks/bench_forward.py --quick --budget-s 330 --d 64 128 256 --n 1024 4096 16384 --out $R/fwd > $R/fwd-sweep.log 2>&1; echo "fwd rc $?"
date -u +%H:%M:%S
timeout -s TERM 70 python3 benchmarks/bench_forward.py --quick --short --budget-s 60 --out $R/short > $R/short.log 2>&1; echo "short rc $?"
date -u +%H:%M:%S
timeout -s TERM 140 python3 benchmarks/bench_variants.py --quick --budget-s 125 --out $R/var > $R/variants.log 2>&1; echo "var rc $?"
date -u +%H:%M:%S
tar -czf $OUT/call1.tar.gz -C $R .
grep -A40 "^| D" $R/fwd/forward.md | head -5
echo; grep -i "ratio\|x FA2\|flashx" $R/fwd/forward.md | head -5
