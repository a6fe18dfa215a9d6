# s67 call 3: call 2's checks of mmak / mmaw ran out of their 80 s (30 / 31 cases OK, none wrong
# or illegal): again with room, beside test_kv_cache.py's CPU tests on the GPU (call 1's ran out
# of 150 s in one process; here 6 processes); then mmak and mmaw timed beside HEAD under Triton's
# own ptxas (d64c), the trees in one process each, nothing else on the GPU.
# carry [".whl", ".scratch/mmak", ".scratch/mmaw"]; ~7 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
TILES64="d64-tma-persist-trim-ts d64-tma-persist-n256-ts d64-c3-tma-persist-ts d64-c3-tma-persist-trim-ts"
for x in mmak mmaw; do
  (PYTHONPATH=/tmp/site:$PWD/.scratch/$x/src timeout -s INT -k 10 200 python3 benchmarks/gluon_forward_check.py \
    --only torch --d 64 --variants $TILES64 > $OUT/check_${x}_torch.log 2>&1; echo $? > $OUT/check_${x}.rc) &
done
python3 scripts/gpu_tests.py --processes 6 --deadline 200 --log $OUT/kv_cpu.log -m "not gpu" tests/test_kv_cache.py > $OUT/kv_cpu_summary.log 2>&1
echo "kv_cache CPU tests on the GPU rc $?"
wait
ok=""
for x in mmak mmaw; do
  rc=$(cat $OUT/check_${x}.rc)
  echo "check $x torch rc $rc: $(grep -c ' OK$' $OUT/check_${x}_torch.log) OK, $(grep -c 'WRONG' $OUT/check_${x}_torch.log) wrong, $(grep -c 'illegal' $OUT/check_${x}_torch.log) illegal"
  if [ "$rc" = 0 ]; then ok="$ok $x=.scratch/$x/src"; fi
done
date -u +%H:%M:%S
if [ -n "$ok" ]; then
  timeout -s INT -k 20 200 python3 benchmarks/ab.py head=src $ok --cases d64c --rounds 2 > $OUT/ab_mma_12.log 2>&1; echo "ab rc $?"
  tail -n 8 $OUT/ab_mma_12.log
fi
date -u +%H:%M:%S
tail -n 8 $OUT/kv_cpu_summary.log
