set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
PYTHONPATH=/tmp/site:$PWD/.scratch/dq3/src timeout -s INT -k 10 100 python3 -m pytest -q -p no:cacheprovider \
  -m gpu tests/test_dropout.py > $OUT/tests_dropout_dq3.log 2>&1
echo "dq3 dropout tests rc $?: $(tail -n 1 $OUT/tests_dropout_dq3.log)"
date -u +%H:%M:%S
timeout -s INT -k 20 170 python3 benchmarks/ab.py head=src dq3=.scratch/dq3/src --cases dropout \
  --only "bwd dense B1 N16384 H16 D128" --rounds 2 --control > $OUT/ab_dropout_dq3.log 2>&1; echo "ab rc $?"
date -u +%H:%M:%S
for i in 1 2; do
  timeout -s TERM 110 python3 benchmarks/bench_forward.py --quick --d 64 --n 1024 --causal yes --budget-s 90 \
    --out $OUT/fwd64_$i > $OUT/fwd64_$i.log 2>&1; echo "fwd64 $i rc $?"
done
date -u +%H:%M:%S
tail -n 5 $OUT/ab_dropout_dq3.log; for i in 1 2; do grep "^| 64" $OUT/fwd64_$i/forward.md; done
