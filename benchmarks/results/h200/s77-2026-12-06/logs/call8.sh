# s77 call 8 (what device time was left; carry [".whl"]): tune.py --dtype float32 once on a GPU, small
# (D = 128 causal dK/dV, one round), to see it run before next_call1.sh relies on it.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
mkdir -p $OUT/tune32
timeout -s INT -k 5 110 python3 benchmarks/tune.py --dtype float32 --d 128 --n 2048 --causal yes --kernels dkdv \
  --workers 8 --compile-s 60 --budget-s 90 --rounds 1 --out $OUT/tune32 > $OUT/tune32/log.txt 2>&1; echo "tune rc $?"
date -u +%H:%M:%S
tail -4 $OUT/tune32/log.txt; grep "^|" $OUT/tune32/tune.md | cut -d'|' -f2-10
