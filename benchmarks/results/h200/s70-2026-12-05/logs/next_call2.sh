# s70 (prepared; second of the next session's calls; the H200 for issue 5's figures): what this session's device
# budget left undone. (1) s69's learned ALiBi slopes and a backward with k and v frozen beside the
# peers (bench_variants.py --cases alibi frozen-kv causal; s69's next_call3.sh's middle part: the
# dQ kernel's slopes sum, offline 128 -> 155 registers at D = 64, 209 -> 251 at D = 128, predicted
# a few percent of the backward; frozen k and v: the dQ pass alone, predicted ~3/7 of a backward).
# (2) The D = 128 backward sweep in turns (pending since s59). (3) The D = 256 forward cells s68's
# sweep skipped (4k, 16k). carry [".whl"]; ~8.5 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
timeout -s TERM 160 python3 benchmarks/bench_variants.py --quick --budget-s 150 --cases alibi frozen-kv causal --d 128 \
  --out $OUT/alibi > $OUT/alibi.log 2>&1; echo "alibi rc $?"
date -u +%H:%M:%S
timeout -s TERM 200 python3 benchmarks/bench_backward.py --quick --budget-s 190 --d 128 --n 1024 4096 16384 \
  --no-memory --out $OUT/bwd > $OUT/bwd.log 2>&1; echo "bwd rc $?"
date -u +%H:%M:%S
timeout -s TERM 150 python3 benchmarks/bench_forward.py --quick --budget-s 140 --d 256 --n 4096 16384 \
  --out $OUT/fwd256 > $OUT/fwd256.log 2>&1; echo "fwd256 rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/alibi/*.md | head -8; grep -A8 "^| D" $OUT/bwd/*.md | head -10; grep "^| 256" $OUT/fwd256/forward.md
