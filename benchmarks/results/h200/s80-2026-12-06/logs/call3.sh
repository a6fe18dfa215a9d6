# s80 call 3 (any card; carry [".whl"]): test_jax.py's GPU tests after 8ab9b01 / 2dcda96 (test_shard_map's
# dropout check on two short sequences; gradients' float32 references jitted); then, on an H200
# only, issue 5's D = 64 1k causal forward cell (5 rounds); on any card, tf32x3 D = 128 at B = 5
# (640 dK/dV and forward programs, between s79's 512 and 768) with the small- and large-grid tiles
# named, to place the small-grid threshold (4 waves = 528 programs now).
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 300 --rerun-failed 60 \
  --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_jax.log -m gpu tests/test_jax.py 2>&1 | tail -10
date -u +%H:%M:%S
o=$OUT/f32_b5; mkdir -p $o
timeout -s INT -k 10 100 python3 benchmarks/bench_float32.py --quick --d 128 --precisions tf32x3 --no-sdpa \
  --shape 5 2048 8 2 --tiles "k=32,32,4,1" "k=64,32,8,1" "f=128,32,8,2" "f=32,64,8,2" --out $o > $o/log.txt 2>&1; echo "f32 B=5 rc $?"
grep "^| 128" $o/float32.md | cut -d'|' -f2-6
date -u +%H:%M:%S
case "$G" in *H200*)
  mkdir -p $OUT/fwd
  timeout -s INT -k 10 120 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
    --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
  grep "^|" $OUT/fwd/forward.md | head -4;;
esac
date -u +%H:%M:%S
