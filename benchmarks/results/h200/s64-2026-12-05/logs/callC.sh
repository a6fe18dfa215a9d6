# s64 (prepared): the essentials in one call, for a session whose device time is short.
# 1. tests/test_kv_cache.py whole: per-sequence lengths, paged caches, the split-KV forward and its
#    combine kernel, compiled for the first time (s63's call4 part 1).
# 2. the GPU cases of what s62-s64 changed: test_jax.py's test_partitioned_launches (jax-triton and
#    Gluon launches inside custom_partitioning's trace) and test_shard_map (jax.shard_map and an
#    Explicit mesh through triton_call), test_dropout.py (the first run of its D = 256 case).
# 3. bench_decode.py --quick on this commit (dense decode: Gluon, unsplit) and on .scratch/ds
#    (decode-dense-split.patch: dense decode on the split tl forward), SDPA FA2 in each.
#    Tree: rm -rf .scratch/ds; mkdir -p .scratch/ds; git archive HEAD src | tar -x -C .scratch/ds
#          (cd .scratch/ds && patch -p1 < ../../benchmarks/results/h200/s64-2026-12-05/logs/decode-dense-split.patch)
# carry [".whl", ".scratch/ds"]; ~9 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
timeout -s INT -k 10 190 python3 -m pytest -q -p no:cacheprovider -ra tests/test_kv_cache.py > $OUT/kv_cache_tests.log 2>&1
echo "kv cache tests rc $?: $(tail -n 1 $OUT/kv_cache_tests.log)"
date -u +%H:%M:%S
timeout -s INT -k 10 150 python3 -m pytest -q -p no:cacheprovider -ra -m gpu tests/test_dropout.py \
  "tests/test_jax.py::test_partitioned_launches" "tests/test_jax.py::test_shard_map" > $OUT/changed_gpu_tests.log 2>&1
echo "changed parts' gpu tests rc $?: $(tail -n 1 $OUT/changed_gpu_tests.log)"
for tree in head ds; do
  src=$PWD/src; [ "$tree" != head ] && src=$PWD/.scratch/$tree/src
  mkdir -p $OUT/$tree
  date -u +%H:%M:%S
  PYTHONPATH=/tmp/site:$src timeout -s INT -k 15 95 python3 benchmarks/bench_decode.py --quick --systems flashx_dense flashx_paged_256 sdpa_flash \
    --out $OUT/$tree > $OUT/$tree/decode.log 2>&1
  echo "$tree decode rc $?"
done
date -u +%H:%M:%S
grep -E "FAILED|ERROR" $OUT/kv_cache_tests.log $OUT/changed_gpu_tests.log | head -n 12
for tree in head ds; do echo "== $tree"; grep "^|" $OUT/$tree/decode.md; done
