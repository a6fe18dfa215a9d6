# s62 (prepared; no GPU was lent this session): the whole GPU-marked suite on this commit, the first since
# session 61's dropout kernels (and with this session's new gpu-marked case, test_shard_map[bfloat16-d64-gpu]:
# flashx inside jax.shard_map and on an Explicit mesh through triton_call, never yet run). 153 tests; 8
# processes; what the deadline leaves goes to tests_gpu.unreached.txt for a --ids rerun in the next call.
# carry [".whl"]; ~9 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 470 --log $OUT/tests_gpu.log -m gpu tests > $OUT/tests_gpu_summary.log 2>&1
echo "gpu suite rc $?"
date -u +%H:%M:%S
cat $OUT/tests_gpu_summary.log | tail -n 25
