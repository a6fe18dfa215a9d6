# s76 call 1 (carry [".whl", ".scratch/land"]): tf32x3 split by flashx's integer ops at D <= 128
# (the landing candidate, .scratch/land: tuning.dot_precision routes float32 "tf32x3" at widths
# 128 / 256 to scores.dot's own split; s75's patch otherwise) against HEAD: (1) test_precision.py's
# GPU tests on the candidate (every precision, s75's final float32 tiles included, and the new
# _tf32_high test); (2) tile_probe.py, HEAD then candidate, D = 64 and 128, twice alternating.
# Predicted (s75 offline: -17 to -26% loop instructions at D <= 128, same HMMA): 10-20% off
# tf32x3's float32 times at D <= 128, errors level (<= 1.2e-6).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
C=$PWD/.scratch/land
(cd $C && PYTHONPATH=/tmp/site:$C/src timeout -s INT -k 10 170 python3 -m pytest -q -m gpu tests/test_precision.py > $OUT/tests_land.log 2>&1; echo "tests land rc $?")
date -u +%H:%M:%S
P=$PWD/benchmarks/results/h200/s75-2026-12-06/logs/tile_probe.py
probe() { timeout -s INT -k 10 80 python3 $P "$@" >> $OUT/probe.log 2>&1 || echo "probe $* rc $?"; }
for d in 64 128 64 128; do
  probe tf32x3 head head $d; PYTHONPATH=/tmp/site:$C/src probe tf32x3 head land $d
done
date -u +%H:%M:%S
tail -3 $OUT/tests_land.log; grep "^|" $OUT/probe.log
