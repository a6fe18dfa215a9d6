set -u
( timeout -s INT -k 20 250 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider $(cat .scratch/failed_ids.txt) > $OUT/t_failed.log 2>&1; echo "rc $?" >> $OUT/t_failed.log ) &
( timeout -s INT -k 20 250 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider -m gpu tests/test_torch.py -k "gluon or tma or route or persist" > $OUT/t_torch_gluon.log 2>&1; echo "rc $?" >> $OUT/t_torch_gluon.log ) &
( timeout 250 python3 benchmarks/gluon_forward_check.py --only torch --d 64 --variants d64-tma-persist-trim-ts > $OUT/check_d64.log 2>&1; echo "rc $?" >> $OUT/check_d64.log ) &
wait
python3 benchmarks/ab.py head=.scratch/head/src new=src --cases d64c --rounds 2 > $OUT/ab_new.log 2>&1
timeout 150 python3 benchmarks/bench_forward.py --quick --d 64 --n 1024 --causal yes --budget-s 100 --out $OUT/fwd64 > $OUT/fwd64.log 2>&1
echo "== fwd64"; tail -n 12 $OUT/fwd64.log
echo "== ab"; tail -n 9 $OUT/ab_new.log
echo "== check"; grep -c " OK" $OUT/check_d64.log; tail -n 2 $OUT/check_d64.log
echo "== tests"; tail -n 3 $OUT/t_failed.log $OUT/t_torch_gluon.log; grep -h "^FAILED\|^ERROR" $OUT/t_*.log
