# s87 call 3 (carry [".whl", ".scratch/base", ".scratch/wide"]; ~5 min): the GPU tests call 2's 150 s did not
# reach or that failed on the check script's old dQ signature (fixed), then ab.py wide (the Gluon dQ
# with its statistics for dense and causal D = 128 too) against HEAD 5385386, 3 rounds.
set -u
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
mkdir -p $OUT/tests $OUT/ab
timeout -s INT -k 10 150 python3 -m pytest -q -m gpu -p no:cacheprovider -rA \
  tests/test_torch.py::test_gpu_gluon_backward_kernels tests/test_jax.py::test_gpu_gluon_dkdv_through_the_plan \
  > $OUT/tests/gpu.log 2>&1; echo "tests rc $?"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $OUT/tests/gpu.log | cut -c1-160 | tail -16
date -u +%H:%M:%S
timeout -s INT -k 10 170 python3 benchmarks/ab.py base=.scratch/base/src wide=.scratch/wide/src \
  --cases bwd1k bwd --only D128 --rounds 3 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -8 $OUT/ab/ab.log | cut -c1-200
date -u +%H:%M:%S
