# s75 call 4 (~6 min, carry [".whl"]): the float32 table on the final tiles (tf32x3's D = 64
# forward and dQ, bf16x3's D = 128 dK/dV and D = 256 backward), then the GPU tests that run float32.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
mkdir -p $OUT/f32
timeout -s INT -k 10 330 python3 benchmarks/bench_float32.py --quick --out $OUT/f32 > $OUT/f32/log.txt 2>&1; echo "f32 rc $?"
date -u +%H:%M:%S
timeout -s INT -k 10 200 python3 -m pytest -q -m gpu tests/test_precision.py tests/test_dropout.py tests/test_torch.py -k "precision or float32" > $OUT/tests.log 2>&1; echo "tests rc $?"
date -u +%H:%M:%S
tail -3 $OUT/tests.log; grep "^|" $OUT/f32/float32.md
