# s74 call 2: float32 through Triton's bf16x6 / bf16x3 dots (float32_precision, new) beside
# tf32x3 / tf32 and SDPA float32 (bench_float32.py, new), then other D = 128 tiles for them.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
mkdir -p $OUT/f32 $OUT/f32w $OUT/tiles
timeout -s INT -k 10 200 python3 benchmarks/bench_float32.py --quick --d 64 128 --precisions tf32x3 tf32 bf16x6 bf16x3 \
  --out $OUT/f32 > $OUT/f32/log.txt 2>&1; echo "f32 rc $?"
timeout -s INT -k 10 120 python3 benchmarks/bench_float32.py --quick --d 256 --precisions tf32x3 tf32 bf16x3 \
  --out $OUT/f32w > $OUT/f32w/log.txt 2>&1; echo "f32 wide rc $?"
P=benchmarks/results/h200/s74-2026-12-06/logs/call2/tile_probe.py
for args in "bf16x3 head head" "bf16x3 f=64,32,4,2 fwd64x32/4" "bf16x3 f=128,32,8,2 fwd128x32/8" \
            "bf16x3 q=64,32,4,2 dq64x32/4" "bf16x6 f=128,32,8,2 fwd128x32/8" "bf16x6 f=64,32,4,2 fwd64x32/4"; do
  timeout -s INT -k 10 60 python3 $P $args >> $OUT/tiles/probe.log 2>&1; echo "probe $args rc $?"
done
date -u +%H:%M:%S
grep "^|" $OUT/f32/float32.md; grep "^|" $OUT/f32w/float32.md; cat $OUT/tiles/probe.log | grep "^|"
