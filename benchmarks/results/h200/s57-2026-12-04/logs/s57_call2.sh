set -u
V="d64-tma-persist-trim-ts d64-c3-tma-persist-trim-ts d64-c3-turns pp pp-tma-persist-trim-ts pp-tma-persist-ovl-ts d256-pp d256-tma-persist-ovl-ts"
( timeout 240 python3 benchmarks/gluon_forward_check.py --only torch --d 64 128 256 --variants $V > $OUT/check_torch.log 2>&1; echo "rc $?" >> $OUT/check_torch.log ) &
( timeout 240 python3 benchmarks/gluon_forward_check.py --only jax --d 64 128 --variants d64-tma-persist-trim-ts pp-tma-persist-ovl-ts > $OUT/check_jax.log 2>&1; echo "rc $?" >> $OUT/check_jax.log ) &
( timeout -s INT -k 20 240 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -m gpu tests/test_torch.py -k "gluon or tma or route or persist or causal" > $OUT/t_torch.log 2>&1; echo "rc $?" >> $OUT/t_torch.log ) &
( timeout -s INT -k 20 240 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -m gpu tests/test_variants.py > $OUT/t_variants.log 2>&1; echo "rc $?" >> $OUT/t_variants.log ) &
wait
python3 benchmarks/ab.py base=.scratch/base/src mask=src --cases d64c n1k --rounds 2 --control > $OUT/ab_mask.log 2>&1
echo "== ab"; tail -n 14 $OUT/ab_mask.log
echo "== check"; grep -c " OK" $OUT/check_torch.log $OUT/check_jax.log; grep -h "WRONG\|FAILED\|^rc" $OUT/check_*.log
echo "== tests"; tail -n 2 $OUT/t_torch.log $OUT/t_variants.log; grep -h "^FAILED\|^ERROR" $OUT/t_*.log
