# s61 call 3: the 16-bit / 7-round dropout draw (working tree) - its GPU tests, then A/B against HEAD's draw and the
# dropout-free tl kernels; then why the row-sum-mma tree's torch build faults (ptxas 12.8 vs 13.0, a sanitizer line)
set -u
date -u +%H:%M:%S
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
timeout -s INT -k 10 150 python3 -m pytest -q -m gpu tests/test_dropout.py -x > $OUT/c3_tests_dropout.log 2>&1; echo "dropout gpu tests rc $?: $(tail -1 $OUT/c3_tests_dropout.log)"
date -u +%H:%M:%S
timeout -s INT -k 20 280 python3 benchmarks/ab.py base=.scratch/base/src new=src tl=src --env tl:FLASHX_GLUON=0 \
  --cases dropout --rounds 2 > $OUT/c3_ab_dropout.log 2>&1; echo "ab rc $?"
date -u +%H:%M:%S
P13=/usr/local/cuda/bin/ptxas; $P13 --version | tail -1
V="d64-tma-persist-trim-ts"
for pt in default p13; do
  if [ $pt = p13 ]; then export TRITON_PTXAS_PATH=$P13; else unset TRITON_PTXAS_PATH; fi
  PYTHONPATH=/tmp/site:$PWD/.scratch/mma/src CUDA_LAUNCH_BLOCKING=1 timeout -s INT -k 10 70 python3 benchmarks/gluon_forward_check.py \
    --only torch --d 64 --variants $V > $OUT/c3_mma_torch_$pt.log 2>&1
  echo "mma torch ptxas=$pt rc $? : $(grep -c ' OK$' $OUT/c3_mma_torch_$pt.log) OK $(grep -c WRONG $OUT/c3_mma_torch_$pt.log) wrong $(grep -c 'illegal' $OUT/c3_mma_torch_$pt.log) illegal"
done
unset TRITON_PTXAS_PATH
date -u +%H:%M:%S
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer 2>/dev/null)
echo "sanitizer: $CS"
if [ -n "$CS" ]; then
  PYTHONPATH=/tmp/site:$PWD/.scratch/mma/src timeout -k 10 100 $CS --print-limit 3 python3 .scratch/s61/one.py > $OUT/c3_sanitizer.log 2>&1; echo "sanitizer rc $?"
  grep -m 12 -B2 -A6 'Invalid\|Error' $OUT/c3_sanitizer.log | head -40
fi
date -u +%H:%M:%S
cat $OUT/c3_tests_dropout.log | tail -5
tail -n 14 $OUT/c3_ab_dropout.log
