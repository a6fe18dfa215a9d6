set -u
( timeout 170 python3 benchmarks/gluon_forward_check.py --only torch --d 64 --variants d64-c3-tma-persist-trim-ts d64-c3-turns d64-tma-persist-trim-ts > $OUT/check_torch_c3.log 2>&1; echo "rc $?" >> $OUT/check_torch_c3.log ) &
( timeout 170 python3 benchmarks/gluon_forward_check.py --only jax --d 64 --variants d64-c3-tma-persist-trim-ts > $OUT/check_jax_c3.log 2>&1; echo "rc $?" >> $OUT/check_jax_c3.log ) &
wait
grep -c " OK" $OUT/check_torch_c3.log $OUT/check_jax_c3.log; grep -h "WRONG\|FAILED\|failures\|^rc" $OUT/check_*.log
true
