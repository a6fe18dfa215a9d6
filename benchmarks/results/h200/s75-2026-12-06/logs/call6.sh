# s75 call 6 (~4 min, carry [".whl"]): "tf32" on bf16x3's tiles at D <= 128 (TF32_TILES, a candidate
# in this tree) against FLOAT32_TILES ('base'), one process each, alternating; then test_precision's
# GPU tests (the only ones that run "tf32") on the candidate. Offline (s75): no spill at D = 64
# (forward / dQ 64 x 64 / 4, 209-250 registers), at D = 128 forward none, dQ 40-120 bytes, dK/dV none.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
P=benchmarks/results/h200/s75-2026-12-06/logs/tile_probe.py
probe() { timeout -s INT -k 10 60 python3 $P "$@" >> $OUT/probe.log 2>&1 || echo "probe $* rc $?"; }
for d in 64 128; do probe tf32 base base $d; probe tf32 head bf16x3-tiles $d; probe tf32 base base $d; probe tf32 head bf16x3-tiles $d; done
date -u +%H:%M:%S
timeout -s INT -k 10 110 python3 -m pytest -q -m gpu tests/test_precision.py > $OUT/tests.log 2>&1; echo "tests rc $?"
date -u +%H:%M:%S
tail -3 $OUT/tests.log; grep "^|" $OUT/probe.log
