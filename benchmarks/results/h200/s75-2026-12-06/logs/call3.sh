# s75 call 3 (~6 min, carry [".whl"]): float32 tiles at D <= 128 not yet timed, one process a tile,
# each group's HEAD tiles first and last (the spread between them is the noise).
# Offline (Triton 3.6, sm_90, s75): tf32x3 D = 64 forward / dQ 64 x 32 / 4 spill none (168-222
# registers; HEAD's 64 x 32 / 8 none either), 64 x 64 / 4 16-40 bytes; bf16x3 dK/dV at D = 64:
# HEAD's 64 x 32 / 8 none, 32 x 64 / 4 none, 64 x 32 / 4 8-32 bytes; at D = 128: HEAD's 32 x 32 / 8
# none, 64 x 32 / 8 8-24 bytes, 32 x 32 / 4 16-56 bytes.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
P=benchmarks/results/h200/s75-2026-12-06/logs/tile_probe.py
probe() { timeout -s INT -k 10 90 python3 $P "$@" >> $OUT/probe.log 2>&1 || echo "probe $* rc $?"; }
probe tf32x3 head head 64
probe tf32x3 "f=64,32,4,2;q=64,32,4,2" fwd-dq-64x32/4 64
probe tf32x3 "f=64,64,4,2;q=64,64,4,2" fwd-dq-64x64/4 64
probe tf32x3 head head 64
probe bf16x3 head head 64
probe bf16x3 "k=32,64,4,2" dkdv-32x64/4 64
probe bf16x3 "k=64,32,4,2" dkdv-64x32/4 64
probe bf16x3 head head 64
probe bf16x3 head head 128
probe bf16x3 "k=64,32,8,2" dkdv-64x32/8 128
probe bf16x3 "k=32,32,4,2" dkdv-32x32/4 128
probe bf16x3 head head 128
date -u +%H:%M:%S
grep "^|" $OUT/probe.log
