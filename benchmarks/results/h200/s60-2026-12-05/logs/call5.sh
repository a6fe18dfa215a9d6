# Session 60, after call 4 found the D = 128 dropout forward out of shared memory at 16k keys:
# the dropout GPU tests and plan tests on the fix (6a7e85e), then the dropout benchmark at
# D = 64 and 128 (the variants' sizes), beside SDPA's FA2 and cuDNN with dropout.
set -u
date -u +%H:%M:%S
timeout -s INT 200 python3 -m pytest -q -m gpu tests/test_dropout.py > $OUT/dropout_gpu.log 2>&1; echo "dropout tests rc $?"
timeout -s INT 60 python3 -m pytest -q tests/test_plan.py -k dropout > $OUT/plan_dropout.log 2>&1; echo "plan rc $?"
date -u +%H:%M:%S
for d in 128 64; do
  R=/tmp/s60v$d; mkdir -p $R
  timeout -s TERM 110 python3 benchmarks/bench_variants.py --quick --cases dropout causal --d $d --out $R > $R/variants.log 2>&1
  echo "variants d$d rc $?"; cp $R/variants.md $OUT/variants-dropout-d$d.md 2>/dev/null
done
date -u +%H:%M:%S
tail -n 3 $OUT/dropout_gpu.log; tail -n 1 $OUT/plan_dropout.log
for d in 128 64; do grep -E '^\| (dense|case)' $OUT/variants-dropout-d$d.md; grep -A3 'Not measured' $OUT/variants-dropout-d$d.md; done
