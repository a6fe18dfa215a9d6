# Prepared in session 60 (no GPU lent): every GPU-marked test on this session's final tree, whose
# kernel files changed since the last GPU run (session 59: mask_mod != 0, SOFTCAP_FORM; session 60:
# the dropout arguments, DROPOUT_SEED and DROPOUT_P, in the tl forward and backward, identical
# PTX offline where DROPOUT_P = 0), the new gpu tests among them (test_gpu_vmap in test_jax.py and
# test_torch.py, test_dropout.py::test_gpu_torch_dropout, test_edge_inputs.py::test_gpu_softcap_forms),
# then the dropout case of bench_variants.py beside SDPA's FA2 and cuDNN. Usual pip/PYTHONPATH
# prefix; carry [".whl"]. ~8 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 330 --log /tmp/tests_gpu.log -m gpu tests \
  > $OUT/tests_gpu_summary.log 2>&1; echo "tests rc $?"
cp /tmp/tests_gpu.log* $OUT/ 2>/dev/null
date -u +%H:%M:%S
R=/tmp/s61v; mkdir -p $R
timeout -s TERM 120 python3 benchmarks/bench_variants.py --quick --cases dropout causal --out $R > $R/variants.log 2>&1
echo "variants rc $?"; tar -czf $OUT/variants-dropout.tar.gz -C $R .
date -u +%H:%M:%S
tail -n 30 $OUT/tests_gpu_summary.log; tail -n 12 $R/variants.log
