# Prepared in s87 (~6 min; carry [".whl", ".scratch/base", ".scratch/wide"]). Make the trees first:
#   mkdir -p .scratch/base .scratch/wide; git archive 5385386 src | tar -x -C .scratch/base
#   git archive HEAD src | tar -x -C .scratch/wide   # then in .scratch/wide/src/flashx/core/tuning.py
#   GLUON_DQ_ROUTE for ("dense", "causal", "window", "map")
# wide = the Gluon dQ (writing the row statistics) for every D = 128 backward, against 5385386
# (the tl dQ writing them): s87's H100 read +2.4% at 4k dense, level at 1k (2 rounds). On an H200,
# 3 rounds, then each kernel's device time at 1k.
set -u
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
mkdir -p $OUT/ab $OUT/kernels
timeout -s INT -k 10 200 python3 benchmarks/ab.py base=.scratch/base/src wide=.scratch/wide/src \
  --cases bwd1k bwd gqa --only D128 --rounds 3 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -9 $OUT/ab/ab.log | cut -c1-200
for t in base wide; do
  PYTHONPATH=/tmp/site:$PWD/.scratch/$t/src timeout -s INT -k 10 90 python3 benchmarks/jax_vs_torch.py --n 1024 \
    --cases bwd128 bwd128c > $OUT/kernels/$t.log 2>&1; echo "$t rc $?"
  grep "kernels (median" $OUT/kernels/$t.log | cut -c1-200
done
date -u +%H:%M:%S
# JAX's causal dK/dV kernel builds Q's and dO's TMA maps in each of its 2048 programs at 1k (NOTES
# v0.42, v0.80): the cp.async tile builds none. Both frontends on it (kernel times; compare JAX's
# dK/dV with the routed TMA tile's above).
PYTHONPATH=/tmp/site:$PWD/src timeout -s INT -k 10 90 python3 benchmarks/jax_vs_torch.py --n 1024 \
  --cases bwd128c bwd128 --dkdv-tile cpasync > $OUT/kernels/cpasync.log 2>&1; echo "cpasync rc $?"
grep "kernels (median\|single\|wall" $OUT/kernels/cpasync.log | cut -c1-200
date -u +%H:%M:%S
