# s86 call 2 (carry [".whl", ".scratch/cur", ".scratch/pf2"]; ~8 min): src = dQ's programs prefetch their first key
# blocks into L2 before their prologue (tuning.DQ_PREFETCH_KV) against .scratch/cur/src (HEAD
# c088a27's): src's kernels' device time at 1k (HEAD's: call 1), ab.py on the 1k and 4k backward
# (2 rounds, control), the backward's GPU tests on src, then src's kernel times (in this order, as
# the device time left is short). pf2 = src with the tl dK/dV programs prefetching their first query
# blocks (Q and dO of the group's first head) the same way. On an H200: issue 5's owed cells first,
# and no tests.
set -u
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
h200=0; [[ "$name" == *H200* ]] && h200=1
[[ $h200 == 1 ]] && bash benchmarks/results/h200/s81-2026-12-07/logs/next_call2.sh
mkdir -p $OUT/kernels $OUT/ab $OUT/tests
timeout -s INT -k 10 200 python3 benchmarks/ab.py cur=.scratch/cur/src pf=src pf2=.scratch/pf2/src --cases bwd1k bwd \
  --rounds 2 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -12 $OUT/ab/ab.log | cut -c1-200
date -u +%H:%M:%S
if [[ $h200 == 0 ]]; then
  timeout -s INT -k 10 170 python3 -m pytest -q -m gpu -p no:cacheprovider -k "grad or backward or dkdv or gradient" \
    tests/test_torch.py tests/test_jax.py tests/test_variants.py tests/test_variants_jax.py tests/test_dropout.py \
    > $OUT/tests/gpu.log 2>&1; echo "tests rc $?"
  tail -3 $OUT/tests/gpu.log
fi
date -u +%H:%M:%S
for t in pf; do
  src=$PWD/src; [[ $t == cur ]] && src=$PWD/.scratch/cur/src
  PYTHONPATH=/tmp/site:$src timeout -s INT -k 10 100 python3 benchmarks/jax_vs_torch.py --n 1024 \
    --cases bwd128 bwd128c > $OUT/kernels/$t.log 2>&1; echo "$t rc $?"
  grep "kernels (median" $OUT/kernels/$t.log | cut -c1-200
done
date -u +%H:%M:%S
