# s61 call 4: the dropout draw whose counters follow the MMA layout (working tree): its GPU tests, A/B against
# HEAD~2 draw (base), 453b711 (d16) and the forward at its full stages (fs3), then bench_variants' dropout rows beside SDPA's FA2 and cuDNN.
set -u
date -u +%H:%M:%S
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout -s INT -k 10 150 python3 -m pytest -q -m gpu tests/test_dropout.py > $OUT/c4_tests_dropout.log 2>&1; echo "dropout gpu tests rc $?: $(tail -1 $OUT/c4_tests_dropout.log)"
date -u +%H:%M:%S
timeout -s INT -k 20 280 python3 benchmarks/ab.py base=.scratch/base/src d16=.scratch/d16/src new=src fs3=.scratch/fs3/src \
  --cases dropout --rounds 2 > $OUT/c4_ab_dropout.log 2>&1; echo "ab rc $?"
date -u +%H:%M:%S
for d in 128 64; do
  R=/tmp/s61v$d; mkdir -p $R
  timeout -s TERM 110 python3 benchmarks/bench_variants.py --quick --cases dropout causal --d $d --out $R > $R/variants.log 2>&1
  echo "variants d$d rc $?"; cp $R/variants.md $OUT/c4_variants-dropout-d$d.md 2>/dev/null; tail -3 $R/variants.log
done
date -u +%H:%M:%S
tail -n 3 $OUT/c4_tests_dropout.log
tail -n 11 $OUT/c4_ab_dropout.log
for d in 128 64; do grep -E '^\| (dense|case)' $OUT/c4_variants-dropout-d$d.md; done
