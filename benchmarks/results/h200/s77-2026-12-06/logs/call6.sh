# s77 call 6 (H100; carry [".whl"]): the float32 table on the final tiles (tf32x3's one-stage backward tiles).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
mkdir -p $OUT/f32
timeout -s INT -k 10 150 python3 benchmarks/bench_float32.py --quick --out $OUT/f32 > $OUT/f32/log.txt 2>&1; echo "f32 rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/f32/float32.md | cut -d'|' -f2-8
