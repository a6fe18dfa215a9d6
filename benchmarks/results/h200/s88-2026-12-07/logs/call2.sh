# s88 call 2 (~8.5 min; carry [".whl", ".scratch/head", ".scratch/wide", ".scratch/wide16"]):
# st16 (src, branch dq-store16: the Gluon dQ stores 16 bytes a thread, not 4) against main 2606c6a
# (.scratch/head); wide16 = st16 with GLUON_DQ_ROUTE widened to dense and causal D = 128. Then each
# kernel's device time at 1k for wide (main, widened) and wide16, then JAX/torch on the cp.async
# dK/dV tile (no TMA maps) at 1k.
set -u
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
mkdir -p $OUT/ab $OUT/kernels
timeout -s INT -k 10 260 python3 benchmarks/ab.py head=.scratch/head/src st16=src wide16=.scratch/wide16/src \
  --cases bwd1k bwd variants gqa --only bwd --rounds 2 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -14 $OUT/ab/ab.log | cut -c1-220
date -u +%H:%M:%S
for t in wide wide16; do
  PYTHONPATH=/tmp/site:$PWD/.scratch/$t/src timeout -s INT -k 10 80 python3 benchmarks/jax_vs_torch.py --n 1024 \
    --cases bwd128 bwd128c > $OUT/kernels/$t.log 2>&1; echo "$t rc $?"
  grep "kernels (median\|device:" $OUT/kernels/$t.log | cut -c1-200
done
date -u +%H:%M:%S
PYTHONPATH=/tmp/site:$PWD/src timeout -s INT -k 10 80 python3 benchmarks/jax_vs_torch.py --n 1024 \
  --cases bwd128c bwd128 --dkdv-tile cpasync > $OUT/kernels/cpasync.log 2>&1; echo "cpasync rc $?"
grep "kernels (median\|device:" $OUT/kernels/cpasync.log | cut -c1-200
date -u +%H:%M:%S
