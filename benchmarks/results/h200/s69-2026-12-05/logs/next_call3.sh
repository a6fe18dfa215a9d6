# s69 (prepared, not run; the H200 for issue 5's figures): the D = 128 backward sweep in turns
# (pending since s59), learned ALiBi slopes beside FlexAttention (s69: the backward's dQ sums the
# slopes' gradient under SLOPES_GRAD; offline its registers rise 128 -> 155 at D = 64 and 209 ->
# 251 at D = 128 non-causal, no occupancy change predicted: a few percent of the backward; Flex
# differentiates a captured slopes tensor through its score_mod), a backward whose k and v take no
# gradient (s69: flashx runs its dQ pass alone; predicted about 3/7 of a full backward's time),
# then decode with every system
# (paged decode takes the split tl forward, whose long-sequence tile the 16-row decode tile
# replaced in s68: not yet timed). s68's next_call3 also re-ran dropout beside FA2 on HEAD; that
# part is left out here to fit (s68's A/B measured its change, 1.074x). carry [".whl"]; ~8 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
timeout -s TERM 200 python3 benchmarks/bench_backward.py --quick --budget-s 190 --d 128 --n 1024 4096 16384 \
  --no-memory --out $OUT/bwd > $OUT/bwd.log 2>&1; echo "bwd rc $?"
date -u +%H:%M:%S
timeout -s TERM 160 python3 benchmarks/bench_variants.py --quick --budget-s 150 --cases alibi frozen-kv causal --d 128 \
  --out $OUT/alibi > $OUT/alibi.log 2>&1; echo "alibi rc $?"
date -u +%H:%M:%S
mkdir -p $OUT/decode
timeout -s INT -k 15 150 python3 benchmarks/bench_decode.py --quick --rounds 1 --out $OUT/decode > $OUT/decode/decode.log 2>&1
echo "decode rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/decode/decode.md | head -10
grep -A8 "^| D" $OUT/bwd/*.md | head -10; grep "^|" $OUT/alibi/*.md | head -6
