# s63 (prepared; no GPU was lent this session): KV caches on the H200 for the first time.
# 1. tests/test_kv_cache.py whole (on the GPU every test runs compiled; the split-KV tests plan for
#    512 SMs, so they split there too; test_paged_decode_gpu: bf16 D = 128 decode over 4k keys).
# 2. bench_decode.py: decode steps (Nq = 1, 32/8 heads, D = 128, B 1/8/32, 4k/16k keys), flashx
#    dense, paged 256 / 16 and JAX paged beside SDPA FA2 / cuDNN and FlexAttention.
# 3. kernel_stats.py --decode (online: the split forward's and combine's resources as compiled here).
# carry [".whl"]; ~6 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
timeout 240 python3 -m pytest -q -p no:cacheprovider -ra tests/test_kv_cache.py > $OUT/kv_cache_tests.log 2>&1
echo "kv cache tests rc $?"; tail -n 4 $OUT/kv_cache_tests.log
date -u +%H:%M:%S
timeout 300 python3 benchmarks/bench_decode.py --out $OUT > $OUT/decode.log 2>&1
echo "bench_decode rc $?"
date -u +%H:%M:%S
cat $OUT/decode.md
