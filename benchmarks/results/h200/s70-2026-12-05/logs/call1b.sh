# s70 call 1b (either card): this session's budget after failed starts allows one call. First the
# whole GPU-marked suite on HEAD in 8 processes to a 270 s deadline (s68's next_call1.sh with a
# shorter deadline and no pass over the unreached, which its log lists), then the JAX 16k question
# at D = 128 three ways (s70's call2.sh's first part, 80 s each). carry [".whl"]; ~9.5 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 270 --rerun-failed 40 \
  --balance benchmarks/results/h200/s68-2026-12-05/logs/call3-tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests > $OUT/tests_gpu_summary.log 2>&1
echo "gpu tests rc $?"
date -u +%H:%M:%S
REPO=$PWD
for desc in host device; do
  timeout -s INT -k 5 80 python3 benchmarks/jax_vs_torch.py --n 16384 --cases fwd128 \
    --torch-descriptors $desc > $OUT/jvt16k_$desc.log 2>&1; echo "jvt $desc rc $?"
done
P12=$(python3 -c "import os, triton; print(os.path.join(os.path.dirname(triton.__file__), 'backends/nvidia/bin/ptxas'))")
mkdir -p /tmp/p12/bin && ln -sf $P12 /tmp/p12/bin/ptxas
(cd /tmp/p12 && timeout -s INT -k 5 80 python3 $REPO/benchmarks/jax_vs_torch.py --n 16384 --cases fwd128 \
  > $OUT/jvt16k_ptxas12.log 2>&1; echo "jvt ptxas12 rc $?")
date -u +%H:%M:%S
tail -n 16 $OUT/tests_gpu_summary.log
for run in host device ptxas12; do echo "== $run"; tail -n 7 $OUT/jvt16k_$run.log; done
