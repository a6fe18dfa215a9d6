# s75 (prepared for the next session; after next_call1.sh; ~6 min; carry [".whl"]).
# tf32x3 with its operands split by integer ops (tf32x3-split-by-integers.patch, scores.dot): the
# high part rounded by an add and a mask, three input_precision="tf32" dots, instead of Triton's own
# tf32x3, whose split emulates cvt.rna.tf32 with a compare and a select as well. Offline (s75,
# offline-tf32x3-split.txt): loop instructions a warp -17 to -26% at D = 64 / 128 (e.g. D = 128
# dK/dV 1510 -> 1204), same HMMA counts; stack bytes level at D = 128, dQ 24-40 -> 112-136 at D =
# 64, and at D = 256 the non-causal forward collapses (32 registers, 7.6 KB of stack: keep HEAD's
# dot there if the rest gains). numpy emulation of the split on 256 x 128 x 256: 9.7e-8 relative
# against Triton's 9.3e-8 (float32's 3.6e-8). Predicted: 10-20% off tf32x3's float32 times at D <= 128.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
B=/tmp/split; rm -rf $B; mkdir -p $B; cp -r src tests pyproject.toml $B/
L=benchmarks/results/h200/s75-2026-12-06/logs
(cd $B && patch -p1 < $OLDPWD/$L/tf32x3-split-by-integers.patch) || { echo "patch failed"; exit 1; }
P=$PWD/$L/tile_probe.py
probe() { timeout -s INT -k 10 90 python3 $P "$@" >> $OUT/probe.log 2>&1 || echo "probe $* rc $?"; }
for d in 64 128 256; do
  probe tf32x3 head head $d; PYTHONPATH=/tmp/site:$B/src probe tf32x3 head split $d
  probe tf32x3 head head $d; PYTHONPATH=/tmp/site:$B/src probe tf32x3 head split $d
done
date -u +%H:%M:%S
(cd $B && PYTHONPATH=/tmp/site:$B/src timeout -s INT -k 10 150 python3 -m pytest -q -m gpu tests/test_precision.py > $OUT/tests_split.log 2>&1; echo "tests rc $?")
date -u +%H:%M:%S
tail -2 $OUT/tests_split.log; grep "^|" $OUT/probe.log
