# s74 call 5 (carry [".whl"]): bench_float32.py on 56fc37a (bf16x3's own D = 128 tiles), every
# precision and D, beside SDPA float32, for the README's float32 table.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
mkdir -p $OUT/f32
timeout -s INT -k 10 330 python3 benchmarks/bench_float32.py --quick --out $OUT/f32 > $OUT/f32/log.txt 2>&1; echo "f32 rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/f32/float32.md
