# s61 call 5: the dropout GPU tests on the landed tree (the forward back on its tuned stages), the dropout
# benchmark at D = 128 beside SDPA's FA2 and cuDNN, then the probe of ab's 0.88x reading of the dropout-free
# D = 64 backward in call 4 (base and new trees, clocks and power logged).
set -u
date -u +%H:%M:%S
timeout -s INT -k 10 120 python3 -m pytest -q -m gpu tests/test_dropout.py > $OUT/c5_tests_dropout.log 2>&1; echo "dropout gpu tests rc $?: $(tail -1 $OUT/c5_tests_dropout.log)"
date -u +%H:%M:%S
R=/tmp/s61c5v128; mkdir -p $R
timeout -s TERM 100 python3 benchmarks/bench_variants.py --quick --cases dropout causal --d 128 --out $R > $R/variants.log 2>&1
echo "variants d128 rc $?"; cp $R/variants.md $OUT/c5_variants-dropout-d128.md 2>/dev/null
date -u +%H:%M:%S
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 250 > $OUT/c5_smi.log 2>&1 &
SMI=$!
for t in new base; do
  if [ $t = base ]; then P=.scratch/base/src; else P=src; fi
  PYTHONPATH=/tmp/site:$PWD/$P timeout -s INT 40 python3 .scratch/s61/probe.py $t >> $OUT/c5_probe.log 2>&1; echo "probe $t rc $?"
done
kill $SMI
date -u +%H:%M:%S
tail -n 2 $OUT/c5_tests_dropout.log
grep -E '^\| (dense|case)' $OUT/c5_variants-dropout-d128.md
grep TFLOP $OUT/c5_probe.log
