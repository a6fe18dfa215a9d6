# s70 call 2 (the H200 preferred; either card): what this session's device budget left after call 1
# (failed starts cost ~90-180 s each). In order of worth:
# 1. s68's next_call2.sh's JAX question, at D = 128 only: the JAX frontend's 8% at N = 16k
#    non-causal, three ways (torch on host descriptors; torch on device descriptors as JAX's; JAX
#    under Triton's ptxas 12.8 found first in the working directory); next_call2.sh's header says
#    what each would show.
# 2. Decode replayed from CUDA graphs (bench_decode.py --cuda-graphs, b052ce5): device time only,
#    beside FA2 under the same graphs.
# 3. s69's learned ALiBi slopes and a backward with k and v frozen beside the peers.
# D = 256 forward cells, the D = 128 backward sweep: later. carry [".whl"]; at most ~7.5 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
REPO=$PWD
for desc in host device; do
  timeout -s INT -k 10 85 python3 benchmarks/jax_vs_torch.py --n 16384 --cases fwd128 \
    --torch-descriptors $desc > $OUT/jvt16k_$desc.log 2>&1; echo "jvt $desc rc $?"
done
P12=$(python3 -c "import os, triton; print(os.path.join(os.path.dirname(triton.__file__), 'backends/nvidia/bin/ptxas'))")
mkdir -p /tmp/p12/bin && ln -sf $P12 /tmp/p12/bin/ptxas && $P12 --version | tail -1
(cd /tmp/p12 && timeout -s INT -k 10 85 python3 $REPO/benchmarks/jax_vs_torch.py --n 16384 --cases fwd128 \
  > $OUT/jvt16k_ptxas12.log 2>&1; echo "jvt ptxas12 rc $?")
date -u +%H:%M:%S
mkdir -p $OUT/decode
timeout -s INT -k 10 100 python3 benchmarks/bench_decode.py --quick --cuda-graphs \
  --systems flashx_dense flashx_paged_256 sdpa_flash sdpa_cudnn --out $OUT/decode > $OUT/decode/decode.log 2>&1
echo "decode rc $?"
date -u +%H:%M:%S
timeout -s TERM 100 python3 benchmarks/bench_variants.py --quick --budget-s 90 --cases alibi frozen-kv --d 128 \
  --out $OUT/alibi > $OUT/alibi.log 2>&1; echo "alibi rc $?"
date -u +%H:%M:%S
for run in host device ptxas12; do echo "== $run"; tail -n 7 $OUT/jvt16k_$run.log; done
grep "^|" $OUT/decode/decode.md | head -9
grep "^|" $OUT/alibi/*.md | head -12
