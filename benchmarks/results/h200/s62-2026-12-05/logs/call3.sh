# s62 (prepared): the frontends' host time after this session's changes (the torch call's DTensor /
# nested check, the JAX launch's varying-axes typing, the Explicit-mesh check), HEAD against 3603576
# (session 61's last commit), with a control; then the GPU tests call2.sh did not reach.
# Before the call: rm -rf .scratch/s61head; mkdir -p .scratch/s61head; git archive 3603576 src | tar -x -C .scratch/s61head
# carry [".whl", ".scratch"]; ~5 min.
set -u
date -u +%H:%M:%S
timeout -s INT -k 20 200 python3 benchmarks/ab.py s61=.scratch/s61head/src head=src --cases host short --calls 20 \
  --rounds 2 --control > $OUT/ab_host.log 2>&1; echo "ab host rc $?"
if [ -s .scratch/unreached.txt ]; then
  python3 scripts/gpu_tests.py --processes 6 --deadline 200 --ids .scratch/unreached.txt --log $OUT/rerun.log > $OUT/rerun_summary.log 2>&1
  echo "rerun rc $?"; tail -n 12 $OUT/rerun_summary.log
fi
date -u +%H:%M:%S
tail -n 12 $OUT/ab_host.log
