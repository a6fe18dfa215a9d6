# s71 (prepared for the next session; either card, ~7 min; carry [".whl"]).
# (1) The 2 test_kv_cache.py GPU tests s71's call 3 left unreached (float32 decode tiles at D = 192
#     and 256; they take the wide float32 tiles, so s71's paged stages do not reach them).
# (2) Split tl forward vs unsplit Gluon for mid-sized calls, by device time: ab.py --cases mid
#     --cuda-graphs (s71's do_bench reading was host-bound: 11-75% apart between rounds).
#     Predicted: split ahead where it at least doubles a grid under 40% of the SMs.
# (3) The dense decode tile's stages: s71's paged step on five stages beat the dense step on three
#     at B = 32 (128.4 vs 135.2 us at 4k keys, 489.5 vs 523.2 at 16k; H200). Dense on 3 / 4 / 5
#     stages (offline, D = 128: 70 / 102 / 134 KiB of shared memory), one process each.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
printf '%s\n' "tests/test_kv_cache.py::test_decode_tile_every_head_dim_gpu[192-float32]" \
  "tests/test_kv_cache.py::test_decode_tile_every_head_dim_gpu[256-float32]" > /tmp/ids.txt
python3 scripts/gpu_tests.py --processes 2 --deadline 170 --ids /tmp/ids.txt --log $OUT/kv.log 2>&1 | tail -n 5
date -u +%H:%M:%S
mkdir -p /tmp/unsplit && cp -r src /tmp/unsplit/ && sed -i 's/^KV_SPLIT_MAX = 16$/KV_SPLIT_MAX = 1/' /tmp/unsplit/src/flashx/core/tuning.py
timeout -s INT -k 10 150 python3 benchmarks/ab.py split=src unsplit=/tmp/unsplit/src --cases mid --rounds 2 --calls 20 \
  --cuda-graphs --json $OUT/mid.json > $OUT/mid.log 2>&1; echo "mid rc $?"
date -u +%H:%M:%S
for stages in 4 5; do
  mkdir -p /tmp/s$stages && cp -r src /tmp/s$stages/
  sed -i "s/^DECODE_FORWARD_TILE = KernelTiles(16, 64, 4, 3)$/DECODE_FORWARD_TILE = KernelTiles(16, 64, 4, $stages)/" /tmp/s$stages/src/flashx/core/tuning.py
  grep -n "^DECODE_FORWARD_TILE" /tmp/s$stages/src/flashx/core/tuning.py
done
for tree in 3 4 5; do
  if [ $tree = 3 ]; then SRC=$PWD/src; else SRC=/tmp/s$tree/src; fi
  mkdir -p $OUT/dec_s$tree
  PYTHONPATH=/tmp/site:$SRC timeout -s INT -k 10 80 python3 benchmarks/bench_decode.py --quick --rounds 1 --cuda-graphs \
    --systems flashx_dense flashx_paged_256 --out $OUT/dec_s$tree > $OUT/dec_s$tree/decode.log 2>&1
  echo "decode stages $tree rc $?"
done
date -u +%H:%M:%S
grep "^|" $OUT/mid.log
for tree in 3 4 5; do echo "== dense decode on $tree stages (paged: 3 + 2 in every tree)"; grep "^|" $OUT/dec_s$tree/decode.md; done
