# s74 (prepared for the next session; the H200 wanted; ~7 min; carry [".whl"]).
# (1) bench_float32.py on the H200 with bf16x3's final tiles (the README's float32 table is of an
#     H100, s74 call 5); (2) bf16x3 at D = 256 on tf32x3's backward tiles (dK/dV 16 x 16 / 4, dQ
#     16 x 32 / 4): offline (Triton 3.6, sm_90, s74) they spill 72-88 and 168-184 bytes a thread
#     where the wide tiles bf16x3 runs on spill 424-464 and 336-352 (NOTES v0.67); predicted: a
#     faster backward, as for tf32x3 (s73); (3) issue 5's D = 64 1k causal forward cell, at the
#     1.5x FA2 line in every run since v0.47 (1.496x on the H200 in s74).
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%H:%M:%S
mkdir -p $OUT/f32 $OUT/fwd
timeout -s INT -k 10 330 python3 benchmarks/bench_float32.py --quick --out $OUT/f32 > $OUT/f32/log.txt 2>&1; echo "f32 rc $?"
P=benchmarks/results/h200/s74-2026-12-06/logs/call6/tile_probe.py
for args in "bf16x3 head head 256" "bf16x3 k=16,16,4,2;q=16,32,4,2 tf32x3-backward-tiles 256" "bf16x3 k=16,16,4,2 dkdv16x16/4 256"; do
  timeout -s INT -k 10 90 python3 $P $args >> $OUT/probe.log 2>&1; echo "probe $args rc $?"
done
timeout -s INT -k 10 100 python3 benchmarks/bench_forward.py --d 64 --n 1024 --causal yes --rounds 5 \
  --systems flashx_torch flashx_jax sdpa_flash sdpa_cudnn flex --out $OUT/fwd > $OUT/fwd/fwd.log 2>&1; echo "fwd rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/f32/float32.md; grep "^|" $OUT/probe.log; grep "^|" $OUT/fwd/forward.md | head -4
