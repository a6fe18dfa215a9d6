set -u
( timeout -s INT -k 20 200 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider tests/test_variants.py -k "torch_compile or registry_key" > $OUT/t_compile_variants.log 2>&1; echo "rc $?" >> $OUT/t_compile_variants.log ) &
( timeout -s INT -k 20 200 python3 -m pytest -q -rfE --tb=short -p no:cacheprovider tests/test_torch.py -k "compile or optional_arrays" > $OUT/t_compile_torch.log 2>&1; echo "rc $?" >> $OUT/t_compile_torch.log ) &
wait
python3 benchmarks/ab.py base=.scratch/base/src mask=src --cases d64c --rounds 4 --control > $OUT/ab_mask4.log 2>&1
for i in 1 2; do timeout 150 python3 benchmarks/bench_forward.py --quick --d 64 --n 1024 --causal yes --budget-s 100 --out /tmp/fwd64_$i > $OUT/fwd64_$i.log 2>&1; cp /tmp/fwd64_$i/forward.json $OUT/fwd64_$i.json; done
echo "== tests"; tail -n 2 $OUT/t_compile_variants.log $OUT/t_compile_torch.log; grep -h "^FAILED\|^ERROR" $OUT/t_*.log
echo "== ab"; tail -n 8 $OUT/ab_mask4.log
echo "== fwd64"; for i in 1 2; do grep "^| 64" $OUT/fwd64_$i.log; done
true
