# s89 call 1 (any card; carry [".whl"]; ~9 min): first JAX's persistent dK/dV probe (s88's
# next_call2.sh part 2, at 1k only: the routed TMA tile, then the persistent one with TMA stores,
# both frontends; torch with device-built maps, causal), then the whole GPU-marked suite on main e77831d (s88's widened Gluon dQ route).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
mkdir -p $OUT/kernels
for tile in routed persist; do
  extra=""; [ $tile = persist ] && extra="--dkdv-tile dkdv-tma-persist --dkdv-set TMA_STORE=1"
  timeout -s INT -k 10 65 python3 benchmarks/jax_vs_torch.py --n 1024 --cases bwd128c bwd128 $extra \
    > $OUT/kernels/${tile}_1024.log 2>&1; echo "$tile 1024 rc $?"
  grep "kernels (median\|device:" $OUT/kernels/${tile}_1024.log | cut -c1-200
done
# What building the maps on the device costs the routed tile where torch is the launcher (JAX's
# gap's other half is its assembler): the lead for JAX reading maps prebuilt by an earlier launch.
timeout -s INT -k 10 50 python3 benchmarks/jax_vs_torch.py --n 1024 --cases bwd128c --torch-descriptors device \
  > $OUT/kernels/torchdev_1024.log 2>&1; echo "torch-device 1024 rc $?"
grep "kernels (median\|device:" $OUT/kernels/torchdev_1024.log | cut -c1-200
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 390 --rerun-failed 20 \
  --balance benchmarks/results/h200/s88-2026-12-07/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -12
date -u +%H:%M:%S
