# s87 call 3b (carry [".whl", ".scratch/base", ".scratch/wide"]; ~4 min, the device time left being short): call 3
# cut down: ab.py wide against HEAD 5385386 at D = 128 (1k and 4k, 2 rounds), then the four check-script
# tests that call 2 failed on the old dQ signature.
set -u
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
mkdir -p $OUT/tests $OUT/ab
timeout -s INT -k 10 140 python3 benchmarks/ab.py base=.scratch/base/src wide=.scratch/wide/src \
  --cases bwd1k bwd --only D128 --rounds 2 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -8 $OUT/ab/ab.log | cut -c1-200
date -u +%H:%M:%S
timeout -s INT -k 10 80 python3 -m pytest -q -m gpu -p no:cacheprovider -rA \
  tests/test_torch.py::test_gpu_gluon_backward_kernels > $OUT/tests/gpu.log 2>&1; echo "tests rc $?"
grep -E "^(PASSED|FAILED|ERROR)|passed|failed" $OUT/tests/gpu.log | cut -c1-160 | tail -8
date -u +%H:%M:%S
