# s72 (prepared for the next session; either card, ~5 min; carry [".whl"]).
# (1) Split tl forward vs unsplit Gluon, mid2's cases (D = 64 / 256, and chunks of 128 / 512
#     queries against 8k keys), from CUDA graphs. s72's call 1 (--cases mid, D = 128): the split
#     calls 8-64% ahead (TFLOP/s); s72 call 5 (H100, one round): mid2 split 1.35-3.29x ahead.
#     This repeats it on the H200, 2 rounds. Predicted: split ahead in every case.
# (2) bench_decode.py --cuda-graphs, 2 rounds, with FA2: the README's decode table on page-ahead.
set -u
date -u +%H:%M:%S
mkdir -p /tmp/unsplit && cp -r src /tmp/unsplit/ && sed -i 's/^KV_SPLIT_MAX = 16$/KV_SPLIT_MAX = 1/' /tmp/unsplit/src/flashx/core/tuning.py
grep -n "^KV_SPLIT_MAX" /tmp/unsplit/src/flashx/core/tuning.py
timeout -s INT -k 10 250 python3 benchmarks/ab.py split=src unsplit=/tmp/unsplit/src --cases mid2 --rounds 2 --calls 20 \
  --cuda-graphs --json $OUT/mid2.json > $OUT/mid2.log 2>&1; echo "mid2 rc $?"
date -u +%H:%M:%S
mkdir -p $OUT/dec
timeout -s INT -k 10 200 python3 benchmarks/bench_decode.py --quick --rounds 2 --cuda-graphs \
  --systems flashx_dense flashx_paged_256 sdpa_flash --out $OUT/dec > $OUT/dec/decode.log 2>&1; echo "decode rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/mid2.log
grep "^|" $OUT/dec/decode.md
