# s68, unchanged in s69 (prepared; the H200 for issue 5's figures): where the JAX frontend's 8% at N = 16k
# non-causal comes from (s68 call 1, H100: the in-turns jax/torch column 0.91 at D = 64, 0.92 at
# D = 128; ms-long calls, so device time, not host time). Offline (Triton 3.6, sm_90,
# kernel_stats.py --offline [--jax] --d 128 --n 16384) both frontends' D = 128 non-causal Gluon
# TMA forward compile alike: 12 warps, 224 KiB, 168 registers, no stack. What differs at run
# time: JAX's kernels are assembled by jaxlib's ptxas (CUDA 13.0) and build their descriptors on
# the device; torch's by Triton's ptxas (12.8) with host descriptors from 512 keys. Three runs of
# jax_vs_torch.py at 16k: (a) as the suite; (b) torch on device-built descriptors too (s68's
# --torch-descriptors device now covers the forward); (c) as (a), run from a folder whose
# bin/ptxas is Triton's, which XLA takes first (v0.21's method). If (b) brings torch down to
# JAX, the descriptors' placement is the 8%; if (c) brings JAX up, the assembler. Then the D = 256
# forward cells that call 1's budget skipped. carry [".whl"]; ~8 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
REPO=$PWD
for desc in host device; do
  timeout -s INT -k 10 110 python3 benchmarks/jax_vs_torch.py --n 16384 --cases fwd128 fwd64 \
    --torch-descriptors $desc > $OUT/jvt16k_$desc.log 2>&1; echo "jvt $desc rc $?"
done
P12=$(python3 -c "import os, triton; print(os.path.join(os.path.dirname(triton.__file__), 'backends/nvidia/bin/ptxas'))")
mkdir -p /tmp/p12/bin && ln -sf $P12 /tmp/p12/bin/ptxas && $P12 --version | tail -1
(cd /tmp/p12 && timeout -s INT -k 10 110 python3 $REPO/benchmarks/jax_vs_torch.py --n 16384 --cases fwd128 fwd64 \
  > $OUT/jvt16k_ptxas12.log 2>&1; echo "jvt ptxas12 rc $?")
date -u +%H:%M:%S
timeout -s TERM 150 python3 benchmarks/bench_forward.py --quick --budget-s 140 --d 256 --n 4096 16384 \
  --out $OUT/fwd256 > $OUT/fwd256.log 2>&1; echo "fwd256 rc $?"
date -u +%H:%M:%S
for run in host device ptxas12; do echo "== $run"; tail -n 8 $OUT/jvt16k_$run.log; done
grep "^| 256" $OUT/fwd256/forward.md
