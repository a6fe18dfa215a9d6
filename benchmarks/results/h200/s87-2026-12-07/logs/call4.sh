# s87 call 4 (carry [".whl"]; ~2.5 min, with the last 266 s of device time): the landed code's GPU tests
# that never ran: the JAX test of the Gluon dQ's row statistics and the check script's dQ launch.
set -u
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
mkdir -p $OUT/tests
timeout -s INT -k 10 130 python3 -m pytest -q -m gpu -p no:cacheprovider -rA \
  tests/test_jax.py::test_gpu_gluon_dq_row_statistics tests/test_torch.py::test_gpu_gluon_backward_kernels \
  > $OUT/tests/gpu.log 2>&1; echo "tests rc $?"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $OUT/tests/gpu.log | cut -c1-160 | tail -10
date -u +%H:%M:%S
