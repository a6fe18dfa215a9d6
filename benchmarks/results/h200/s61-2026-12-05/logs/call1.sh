# Prepared in session 59 (no GPU lent), for the next session's first GPU call: the two row-sum
# patches checked, then timed against HEAD. Before the call, on the CPU box:
#   for x in mma parts; do rm -rf .scratch/$x; mkdir -p .scratch/$x; git archive HEAD src | tar -x -C .scratch/$x; done
#   (cd .scratch/mma && patch -p1 < ../../benchmarks/results/h200/s59-2026-12-04/logs/row-sum-mma.patch)
#   (cd .scratch/parts && patch -p1 < ../../benchmarks/results/h200/s58-2026-12-04/logs/row-sum-parts.patch)
# then run with carry [".whl", ".scratch"] after the usual pip/PYTHONPATH prefix. ~6-7 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
TILES64="d64-tma-persist-trim-ts d64-tma-persist-n256-ts d64-c3-tma-persist-ts d64-c3-tma-persist-trim-ts"
for x in mma parts; do
  for fe in torch jax; do
    PYTHONPATH=/tmp/site:$PWD/.scratch/$x/src timeout -s INT -k 10 100 python3 benchmarks/gluon_forward_check.py \
      --only $fe --d 64 --variants $TILES64 > $OUT/check_${x}_${fe}.log 2>&1
    echo "check $x $fe rc $?"
  done
done
date -u +%H:%M:%S
timeout -s INT -k 20 300 python3 benchmarks/ab.py base=src parts=.scratch/parts/src mma=.scratch/mma/src \
  --cases d64c n1k --rounds 2 --control > $OUT/ab_rowsum.log 2>&1; echo "ab rc $?"
date -u +%H:%M:%S
echo "== checks"; for f in $OUT/check_*.log; do echo "$(basename $f): $(grep -c ' OK$' $f) OK, $(grep -c 'WRONG\|FAILED' $f) wrong; $(grep 'correctness failures' $f)"; done
echo "== ab"; tail -n 16 $OUT/ab_rowsum.log
