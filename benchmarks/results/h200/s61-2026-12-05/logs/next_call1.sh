# Prepared in session 61 for the next GPU session: (1) the dropout GPU tests on this tree if call 5 did not
# run them; (2) the row-sum-mma tree timed where it runs correctly (both trees under CUDA 13.0's ptxas, as
# jaxlib assembles JAX's kernels), to learn what the patch is worth before hunting ptxas 12.8's fault;
# (3) the probe of call 4's dropout-free D = 64 backward reading. Build the tree first (s59 logs' header):
#   rm -rf .scratch/mma; mkdir -p .scratch/mma; git archive HEAD src | tar -x -C .scratch/mma
#   (cd .scratch/mma && patch -p1 < ../../benchmarks/results/h200/s59-2026-12-04/logs/row-sum-mma.patch)
#   git archive 4f3127a src | tar -x -C .scratch/base   (into an empty .scratch/base)
# carry [".whl", ".scratch"]; ~6 min.
set -u
date -u +%H:%M:%S
timeout -s INT -k 10 120 python3 -m pytest -q -m gpu tests/test_dropout.py > $OUT/tests_dropout.log 2>&1; echo "dropout gpu tests rc $?: $(tail -1 $OUT/tests_dropout.log)"
P13=/usr/local/cuda/bin/ptxas
timeout -s INT -k 20 240 python3 benchmarks/ab.py base13=src mma13=.scratch/mma/src base=src \
  --env base13:TRITON_PTXAS_PATH=$P13 --env mma13:TRITON_PTXAS_PATH=$P13 --cases d64c n1k --rounds 2 > $OUT/ab_mma13.log 2>&1; echo "ab rc $?"
for t in new base; do
  if [ $t = base ]; then P=.scratch/base/src; else P=src; fi
  PYTHONPATH=/tmp/site:$PWD/$P timeout -s INT 60 python3 benchmarks/results/h200/s61-2026-12-05/logs/call5-probe.py $t >> $OUT/probe.log 2>&1; echo "probe $t rc $?"
done
date -u +%H:%M:%S
tail -n 2 $OUT/tests_dropout.log; tail -n 12 $OUT/ab_mma13.log; grep TFLOP $OUT/probe.log
