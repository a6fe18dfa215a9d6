# s66 call 3: the two compile cases in a fresh process (the reduce-overhead paged decode first: the
# process's first flashx call is traced), then the whole GPU-marked suite on this commit, each
# pytest process with its own Triton cache folder (scripts/gpu_tests.py). carry [".whl"]; ~8 min.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u +%H:%M:%S
timeout -k 10 150 python3 -m pytest -q -p no:cacheprovider tests/test_kv_cache.py::test_paged_decode_reduce_overhead_gpu \
  tests/test_torch.py::test_torch_compile_first_call_of_the_process > $OUT/compile_first.log 2>&1
echo "compile-first rc $?"; tail -n 1 $OUT/compile_first.log
python3 scripts/gpu_tests.py --processes 8 --deadline 400 --log $OUT/tests_gpu.log -m gpu tests > $OUT/tests_gpu_summary.log 2>&1
echo "gpu suite rc $?"
date -u +%H:%M:%S
tail -n 14 $OUT/tests_gpu_summary.log
