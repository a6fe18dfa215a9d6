set -u

python3 .scratch/split_tests.py 8 370 $OUT .scratch/rest_ids.txt
python3 benchmarks/ab.py head=.scratch/head/src alt=.scratch/alt/src --cases d64c short --rounds 2 > $OUT/ab_alt.log 2>&1
tail -n 22 $OUT/ab_alt.log
grep -h "^FAILED\|^ERROR\|Timeout\|passed\|failed" $OUT/tests.log | head -40
