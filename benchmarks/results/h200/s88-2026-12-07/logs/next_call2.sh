# Prepared in s88 (~7 min; carry [".whl", ".scratch/head"]). Make the tree first:
#   mkdir -p .scratch/head; git archive 2606c6a src | tar -x -C .scratch/head
# 1. On an H200: s88's route (the Gluon dQ, 16-byte stores, for every D = 128 backward) against main
#    2606c6a (the tl dQ at dense and causal); s88's H100 read 1.028 / 1.055 at 1k, 1.052 / 0.995 at 4k.
# 2. JAX's dK/dV builds its Q/dO (and dK/dV) TMA maps in every one of its 2048 programs at 1k; the
#    persistent tile builds them once per SM. Both frontends on it, TMA stores on (compiles offline
#    with JAX's specialization: 168 registers, 56 / 120 bytes of stack), at 1k and 4k.
set -u
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
mkdir -p $OUT/ab $OUT/kernels
timeout -s INT -k 10 240 python3 benchmarks/ab.py head=.scratch/head/src new=src \
  --cases bwd1k bwd variants gqa --only bwd --rounds 2 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -14 $OUT/ab/ab.log | cut -c1-200
date -u +%H:%M:%S
for n in 1024 4096; do
  timeout -s INT -k 10 70 python3 benchmarks/jax_vs_torch.py --n $n --cases bwd128c bwd128 \
    > $OUT/kernels/routed_$n.log 2>&1; echo "routed $n rc $?"
  grep "kernels (median\|device:" $OUT/kernels/routed_$n.log | cut -c1-200
  timeout -s INT -k 10 70 python3 benchmarks/jax_vs_torch.py --n $n --cases bwd128c bwd128 \
    --dkdv-tile dkdv-tma-persist --dkdv-set TMA_STORE=1 > $OUT/kernels/persist_$n.log 2>&1; echo "persist $n rc $?"
  grep "kernels (median\|device:" $OUT/kernels/persist_$n.log | cut -c1-200
done
date -u +%H:%M:%S
