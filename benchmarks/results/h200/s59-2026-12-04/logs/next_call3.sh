# Prepared in session 59: the backward sweep (in-turns timing), the ptxas probe, the tests
# that session 58's deadline cut, and session 59's softcap forms on the GPU. Write the ids file first:
#   printf '%s\n' 'tests/test_variants_jax.py::test_gpu_grads[gqa-8:2-n1024-d128-causal]' \
#     'tests/test_variants.py::test_gpu_gluon_forward_windows_and_maps[q1000-kv600-window-100-rows-without-keys-bhnd]' \
#     'tests/test_variants.py::test_gpu_gluon_forward_windows_and_maps[d256-holes]' \
#     'tests/test_variants_jax.py::test_gpu_gluon_forward_windows_and_maps[d64-documents-causal]' \
#     'tests/test_torch.py::test_torch_compile_with_optional_arrays[sdpa-mask]' \
#     'tests/test_edge_inputs.py::test_gpu_softcap_forms' > .scratch/rerun_ids.txt
set -u
date -u +%H:%M:%S
R=/tmp/s60c3; mkdir -p $R/bwd
timeout -s TERM 200 python3 benchmarks/bench_backward.py --quick --budget-s 190 --d 128 --n 1024 4096 16384 \
  --no-memory --out $R/bwd > $R/bwd.log 2>&1; echo "bwd rc $?"
tar -czf $OUT/call3-bwd.tar.gz -C $R .
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 5 --deadline 200 --ids .scratch/rerun_ids.txt --log $OUT/rerun.log \
  > $OUT/rerun_summary.log 2>&1
date -u +%H:%M:%S
timeout -s INT -k 20 120 python3 benchmarks/ab.py host=src ptxas13=src \
  --env ptxas13:TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas --cases fwd n1k --rounds 2 --control \
  > $OUT/ab_ptxas.log 2>&1; echo "ab rc $?"
date -u +%H:%M:%S
tail -n 24 $R/bwd.log; cat $OUT/rerun_summary.log; tail -n 14 $OUT/ab_ptxas.log
