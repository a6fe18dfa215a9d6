# s67 (prepared; the H200, issue 5's figures): the D = 128 backward sweep with the in-turns timing
# (s59's next_call3 part 1); two more processes of the D = 64 1k causal forward cell (the one at
# the 1.5x FA2 line: next_call1's sweep gives one reading); dropout's GPU tests on the dq3 tree
# (next_call3 times it).
# Tree: L=benchmarks/results/h200; rm -rf .scratch/dq3; mkdir -p .scratch/dq3; git archive HEAD src | tar -x -C .scratch/dq3
#   (cd .scratch/dq3 && patch -p1 < ../../$L/s67-2026-12-05/logs/dropout-dq-3-stages.patch)
# carry [".whl", ".scratch/dq3"]; ~8 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
R=/tmp/c2; mkdir -p $R/bwd
timeout -s TERM 200 python3 benchmarks/bench_backward.py --quick --budget-s 190 --d 128 --n 1024 4096 16384 \
  --no-memory --out $R/bwd > $R/bwd.log 2>&1; echo "bwd rc $?"
date -u +%H:%M:%S
for i in 1 2; do
  timeout -s TERM 110 python3 benchmarks/bench_forward.py --quick --d 64 --n 1024 --causal yes --budget-s 90 \
    --out $R/fwd64_$i > $R/fwd64_$i.log 2>&1; echo "fwd64 $i rc $?"
done
date -u +%H:%M:%S
PYTHONPATH=/tmp/site:$PWD/.scratch/dq3/src timeout -s INT -k 10 100 python3 -m pytest -q -p no:cacheprovider \
  -m gpu tests/test_dropout.py > $R/tests_dropout_dq3.log 2>&1
echo "dq3 dropout tests rc $?: $(tail -n 1 $R/tests_dropout_dq3.log)"
date -u +%H:%M:%S
tar -czf $OUT/call2.tar.gz -C $R .
grep -A8 "^| D" $R/bwd/*.md | head -12; for i in 1 2; do grep "^| 64" $R/fwd64_$i/forward.md; done
