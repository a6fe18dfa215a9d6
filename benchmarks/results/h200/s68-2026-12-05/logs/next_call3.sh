# s68 (prepared; the H200 for issue 5's figures): the D = 128 backward sweep in turns (pending
# since s59's next_call3 part 1), then dropout at D = 128 beside FA2 and cuDNN on HEAD (dQ on
# three stages since s68: the H100 A/B read 1.074x the backward of call 1's 0.96x FA2), then
# decode with every system (paged decode takes the split tl forward, whose long-sequence tile the
# 16-row decode tile replaced in s68: not yet timed; v0.57's paged B = 32 ran at half the dense
# path's bandwidth). carry [".whl"]; ~8 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
timeout -s TERM 200 python3 benchmarks/bench_backward.py --quick --budget-s 190 --d 128 --n 1024 4096 16384 \
  --no-memory --out $OUT/bwd > $OUT/bwd.log 2>&1; echo "bwd rc $?"
date -u +%H:%M:%S
timeout -s TERM 150 python3 benchmarks/bench_variants.py --quick --cases dropout causal --d 128 --out $OUT/drop \
  > $OUT/drop.log 2>&1; echo "dropout rc $?"
date -u +%H:%M:%S
mkdir -p $OUT/decode
timeout -s INT -k 15 150 python3 benchmarks/bench_decode.py --quick --rounds 1 --out $OUT/decode > $OUT/decode/decode.log 2>&1
echo "decode rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/decode/decode.md | head -10
grep -A8 "^| D" $OUT/bwd/*.md | head -10; grep "^|" $OUT/drop/*.md | head -6
