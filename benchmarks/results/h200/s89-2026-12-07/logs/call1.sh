# s89 call 1 (any card; carry [".whl"]; LIMIT seconds in all, default 540): first JAX's persistent
# dK/dV probe at 1k causal (s88's next_call2.sh part 2, trimmed: the routed TMA tile, then the
# persistent one with TMA stores, both frontends; then torch on device-built maps, what building
# them costs the routed tile without JAX's assembler), then the whole GPU-marked suite on main
# (s88's widened Gluon dQ route), its deadline what is left of LIMIT less 25 s.
set -u
start=$(date +%s); LIMIT=${LIMIT:-540}
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
mkdir -p $OUT/kernels
for tile in routed persist torchdev; do
  extra=""
  [ $tile = persist ] && extra="--dkdv-tile dkdv-tma-persist --dkdv-set TMA_STORE=1"
  [ $tile = torchdev ] && extra="--torch-descriptors device"
  timeout -s INT -k 10 50 python3 benchmarks/jax_vs_torch.py --n 1024 --cases bwd128c $extra \
    > $OUT/kernels/${tile}_1024.log 2>&1; echo "$tile 1024 rc $?"
  grep "kernels (median\|device:" $OUT/kernels/${tile}_1024.log | cut -c1-200
done
date -u +%H:%M:%S
deadline=$(( LIMIT - ($(date +%s) - start) - 25 )); echo "tests deadline $deadline s"
python3 scripts/gpu_tests.py --processes 8 --deadline $deadline \
  --balance benchmarks/results/h200/s88-2026-12-07/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -12
date -u +%H:%M:%S
