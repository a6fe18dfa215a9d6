# s74 call 7 (carry [".whl"]): bf16x3's D = 64 tiles (forward and dQ 64 x 64 / 4, call 6) in
# tuning.BF16X3_TILES: test_precision.py's GPU tests (both frontends; D = 64 / 128 / 256), then
# bench_float32.py at D = 64.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
timeout -s INT -k 10 150 python3 -m pytest -q -m gpu tests/test_precision.py -p no:cacheprovider > $OUT/tests.log 2>&1; echo "tests rc $?"
mkdir -p $OUT/f32
timeout -s INT -k 10 80 python3 benchmarks/bench_float32.py --quick --d 64 --precisions tf32x3 bf16x3 --out $OUT/f32 > $OUT/f32/log.txt 2>&1; echo "f32 rc $?"
date -u +%H:%M:%S
tail -n 3 $OUT/tests.log; grep "^|" $OUT/f32/float32.md
