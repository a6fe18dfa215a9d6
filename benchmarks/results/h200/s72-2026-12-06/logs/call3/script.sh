# s72 call 3: float32 at D > 128 on FLOAT32_WIDE_TILES' new tiles (tests, a timing probe), and the
# decode steps with page-ahead landed (dense and paged, from CUDA graphs).
set -u
L=benchmarks/results/h200/s72-2026-12-06/logs
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
printf '%s\n' "tests/test_kv_cache.py::test_decode_tile_every_head_dim_gpu[192-float32]" \
  "tests/test_kv_cache.py::test_decode_tile_every_head_dim_gpu[256-float32]" \
  "tests/test_torch.py::test_gpu_float32_wide_gradients[192]" "tests/test_torch.py::test_gpu_float32_wide_gradients[256]" \
  "tests/test_torch.py::test_gpu_large_shapes[gqa-q777-kv1023-d256-dv200-fp32]" \
  "tests/test_torch.py::test_gpu_large_shapes[n1023-d128-causal-fp32]" > /tmp/ids.txt
python3 scripts/gpu_tests.py --processes 6 --deadline 150 --ids /tmp/ids.txt --log $OUT/tests.log 2>&1 | tail -n 9
date -u +%H:%M:%S
timeout -s INT -k 10 120 python3 $L/f32_probe.py new > $OUT/probe_new.log 2>&1; echo "new rc $?"
date -u +%H:%M:%S
mkdir -p $OUT/dec
timeout -s INT -k 10 100 python3 benchmarks/bench_decode.py --quick --rounds 1 --cuda-graphs \
  --systems flashx_dense flashx_paged_256 --out $OUT/dec > $OUT/dec/decode.log 2>&1; echo "decode rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/probe_new.log | cut -c1-330
grep "^|" $OUT/dec/decode.md
