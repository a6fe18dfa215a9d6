# s69 (prepared, not run: no GPU was lent in session 69; either card, the H200 preferred): the
# whole GPU-marked suite on HEAD, the first since s68's decode tile and split route (ac92175),
# its new GPU tests (test_decode_tile_every_head_dim_gpu, test_gpu_torch_dropout_float32) and
# s69's learned ALiBi slopes (test_gpu_alibi_slopes_gradient) and backward of some inputs
# (test_gpu_backward_of_some_inputs); then whatever the deadline left
# unreached, in three processes. On s68's
# H100 every process ran to its deadline and one JAX test ran out of the 80 GB card's memory beside
# seven other processes (it passed alone). carry [".whl"]; ~9.5 min.
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 380 --rerun-failed 60 \
  --balance benchmarks/results/h200/s68-2026-12-05/logs/call3-tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests > $OUT/tests_gpu_summary.log 2>&1
echo "gpu tests rc $?"
date -u +%H:%M:%S
if [ -s $OUT/tests_gpu.unreached.txt ]; then
  split -n l/3 -d $OUT/tests_gpu.unreached.txt /tmp/unreached
  for p in /tmp/unreached0*; do
    [ -s $p ] && timeout -s INT -k 10 100 python3 -m pytest -q -p no:cacheprovider -m gpu $(cat $p) \
      > $OUT/unreached_$(basename $p).log 2>&1 &
  done; wait
  tail -n 1 $OUT/unreached_*.log
fi
date -u +%H:%M:%S
tail -n 14 $OUT/tests_gpu_summary.log
