# s72 call 6: float32 at D <= 128 on their own tiles (tuning.FLOAT32_TILES, working tree): the
# float32 GPU tests, then call4/f32_probe.py's D <= 128 cases on the working tree and on HEAD's
# tuning (the 16-bit tiles of twice the width).
set -u
L=benchmarks/results/h200/s72-2026-12-06/logs
nvidia-smi --query-gpu=name --format=csv,noheader; date -u +%H:%M:%S
printf '%s\n' "tests/test_torch.py::test_gpu_float32_gradients[64]" "tests/test_torch.py::test_gpu_float32_gradients[128]" \
  "tests/test_torch.py::test_gpu_float32_gradients[192]" "tests/test_torch.py::test_gpu_float32_gradients[256]" \
  "tests/test_dropout.py::test_gpu_torch_dropout_float32[64]" "tests/test_dropout.py::test_gpu_torch_dropout_float32[128]" \
  "tests/test_torch.py::test_gpu_large_shapes[gqa-q777-kv1023-d256-dv200-fp32]" \
  "tests/test_torch.py::test_gpu_large_shapes[n1023-d128-causal-fp32]" \
  "tests/test_kv_cache.py::test_decode_tile_every_head_dim_gpu[64-float32]" \
  "tests/test_kv_cache.py::test_decode_tile_every_head_dim_gpu[128-float32]" > /tmp/ids.txt
python3 scripts/gpu_tests.py --processes 10 --deadline 100 --ids /tmp/ids.txt --log $OUT/tests.log 2>&1 | tail -n 12
date -u +%H:%M:%S
timeout -s INT -k 5 60 python3 $L/call4/f32_probe.py new 3 > $OUT/probe_new.log 2>&1; echo "new rc $?"
mkdir -p /tmp/head && cp -r src /tmp/head/ && cp .scratch/head_tuning.py /tmp/head/src/flashx/core/tuning.py
PYTHONPATH=/tmp/site:/tmp/head/src timeout -s INT -k 5 70 python3 $L/call4/f32_probe.py head 3 > $OUT/probe_head.log 2>&1; echo "head rc $?"
date -u +%H:%M:%S
grep -h "^|" $OUT/probe_new.log $OUT/probe_head.log | cut -c1-300
