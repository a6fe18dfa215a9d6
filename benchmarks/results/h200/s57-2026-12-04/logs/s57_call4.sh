set -u
python3 scripts/gpu_tests.py --processes 8 --deadline 250 --log $OUT/tests_jax.log -m gpu tests/test_jax.py tests/test_variants_jax.py tests/test_dropins.py tests/test_interop.py tests/test_plan.py > $OUT/tests_jax_summary.log 2>&1
timeout 280 python3 benchmarks/ab.py base=.scratch/base/src offs=src cols=.scratch/m2/src --cases d64c fwd n1k --rounds 3 --control > $OUT/ab_forms.log 2>&1
echo "== tests"; tail -n 12 $OUT/tests_jax_summary.log
echo "== ab"; tail -n 16 $OUT/ab_forms.log
true
