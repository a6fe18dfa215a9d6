set -u
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 5 --deadline 140 --ids .scratch/rerun_ids.txt --log $OUT/rerun.log > $OUT/rerun_summary.log 2>&1
date -u +%H:%M:%S
timeout -s INT 70 python3 benchmarks/ab.py --cases fwd --rounds 2 host=src ptxas13=.scratch/p13/src > $OUT/ab_ptxas.log 2>&1; echo "ab rc $?"
date -u +%H:%M:%S
cat $OUT/rerun_summary.log; grep -h "^FAILED\|^ERROR" $OUT/rerun.log
tail -n 13 $OUT/ab_ptxas.log
