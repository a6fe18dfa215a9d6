# s68 (prepared; the H200 for issue 5's figures): (1) where the JAX frontend's 8% at N = 16k
# non-causal comes from (s68 call 1, H100: the in-turns jax/torch column 0.91 at D = 64, 0.92 at
# D = 128, ms-long calls, so device time, not host time): jax_vs_torch.py with torch on its host
# descriptors (the suite's), then on device-built ones as JAX's; if torch drops to JAX's figure
# with device descriptors, the descriptors' placement is the lever, else the assembler (v0.43
# item 6's method); (2) the D = 256 forward cells that call 1's budget skipped; (3) the D = 128
# backward sweep in turns (s59's next_call3 part 1). carry [".whl"]; ~9 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
for desc in host device; do
  timeout -s INT -k 10 100 python3 benchmarks/jax_vs_torch.py --n 16384 --cases fwd128 fwd64 \
    --torch-descriptors $desc > $OUT/jvt16k_$desc.log 2>&1; echo "jvt $desc rc $?"
done
date -u +%H:%M:%S
timeout -s TERM 150 python3 benchmarks/bench_forward.py --quick --budget-s 140 --d 256 --n 4096 16384 \
  --out $OUT/fwd256 > $OUT/fwd256.log 2>&1; echo "fwd256 rc $?"
date -u +%H:%M:%S
timeout -s TERM 200 python3 benchmarks/bench_backward.py --quick --budget-s 190 --d 128 --n 1024 4096 16384 \
  --no-memory --out $OUT/bwd > $OUT/bwd.log 2>&1; echo "bwd rc $?"
date -u +%H:%M:%S
for desc in host device; do echo "== $desc"; tail -n 8 $OUT/jvt16k_$desc.log; done
grep "^| 256" $OUT/fwd256/forward.md; grep -A8 "^| D" $OUT/bwd/*.md | head -10
