set -u
( timeout 200 python3 benchmarks/gluon_forward_check.py --only jax --d 64 --variants d64-tma-persist-trim-ts > $OUT/check_d64_jax.log 2>&1; echo "rc $?" >> $OUT/check_d64_jax.log ) &
( timeout -s INT -k 15 200 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -m gpu tests/test_jax.py tests/test_variants.py -k "gluon_forward or causal" > $OUT/t_jax_var.log 2>&1; echo "rc $?" >> $OUT/t_jax_var.log ) &
wait
echo "== check jax"; grep -c " OK" $OUT/check_d64_jax.log; tail -n 3 $OUT/check_d64_jax.log
echo "== tests"; tail -n 3 $OUT/t_jax_var.log; grep -h "^FAILED\|^ERROR" $OUT/t_jax_var.log
