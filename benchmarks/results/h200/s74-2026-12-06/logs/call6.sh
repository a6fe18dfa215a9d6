# s74 call 6 (carry [".whl"]): bf16x3's D = 128 tiles for tf32 (untuned) and tf32x3's dQ; bf16x3 at
# D = 64 on other forward / dQ tiles (call6/tile_probe.py: call 2's probe, any D).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
P=benchmarks/results/h200/s74-2026-12-06/logs/call6/tile_probe.py
for args in "tf32 head head 128" "tf32 f=64,32,4,2;q=64,32,4,2 fwd+dq64x32/4 128" "tf32x3 q=64,32,4,2 dq64x32/4 128" \
            "bf16x3 head head 64" "bf16x3 f=64,32,4,2 fwd64x32/4 64" "bf16x3 f=64,64,4,2 fwd64x64/4 64" \
            "bf16x3 q=64,32,4,2 dq64x32/4 64" "bf16x3 q=64,64,4,2 dq64x64/4 64"; do
  timeout -s INT -k 10 60 python3 $P $args >> $OUT/probe.log 2>&1; echo "probe $args rc $?"
done
date -u +%H:%M:%S
grep "^|" $OUT/probe.log
