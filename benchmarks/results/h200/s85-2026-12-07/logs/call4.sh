# s85 call 4 (carry [".whl", ".scratch/pooled"]; ~8 min, any card): compile_together building the
# launchers on the calling thread (after call 3's "function takes exactly 109 arguments (165 given)"
# in a first backward): the compile cost, fresh processes and empty caches (bench_compile.py
# --quick), of src and of .scratch/pooled/src (src with bceeb9f's launch.py: launchers built on
# the pool); then the whole GPU-marked suite on src.
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
mkdir -p $OUT/compile-serial $OUT/compile-pooled
for tree in serial pooled; do
  src=src; [[ $tree == pooled ]] && src=.scratch/pooled/src
  PYTHONPATH=/tmp/site:$PWD/$src timeout -s INT -k 10 100 python3 benchmarks/bench_compile.py --quick \
    --out $OUT/compile-$tree > $OUT/compile-$tree/log 2>&1; echo "compile $tree rc $?"
  grep "^|" $OUT/compile-$tree/compile.md | head -7 | cut -c1-200
done
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 380 --rerun-failed 50 \
  --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -14
date -u +%H:%M:%S
