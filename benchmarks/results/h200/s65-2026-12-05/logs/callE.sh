# s65 (prepared; this session had 54 s of device time, no machine): the settled decode rerun
# (NOTES v0.57 item 6 asked for it) on three trees, two rounds each, SDPA FA2 in every run:
#   head   this commit (dense 16-bit decode: Gluon forward, packed, one program a tile, unsplit;
#          paged decode: the split tl forward with the long-sequence 128-row tile);
#   ds     decode-dense-split.patch: a call whose tl forward splits its keys (SPLIT_KEYS) leaves
#          the Gluon route, so dense decode at B = 1 splits as paged decode does;
#   dsm16  ds plus s63's decode-tile-m16.patch (a 16-row query tile, 4 warps, for calls of <= 16
#          query rows: offline 154 registers and 38 KiB against the 128-row tile's 255 and 161).
# Then the test_kv_cache.py cases that session 64's call did not reach (split keys, packed, JAX,
# CUDA graphs, reduce-overhead), on the head tree.
# Trees, built on the CPU box before the call:
#   L=benchmarks/results/h200; for t in ds dsm16; do rm -rf .scratch/$t; mkdir -p .scratch/$t
#     git archive HEAD src | tar -x -C .scratch/$t; (cd .scratch/$t && patch -p1 < ../../$L/s64-2026-12-05/logs/decode-dense-split.patch); done
#   (cd .scratch/dsm16 && patch -p1 < ../../$L/s63-2026-12-05/logs/decode-tile-m16.patch)
# carry [".whl", ".scratch/ds", ".scratch/dsm16"]; ~9 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
SYSTEMS="flashx_dense flashx_paged_256 sdpa_flash"
for tree in head ds dsm16; do
  src=$PWD/src; [ "$tree" != head ] && src=$PWD/.scratch/$tree/src
  mkdir -p $OUT/$tree
  date -u +%H:%M:%S
  PYTHONPATH=/tmp/site:$src timeout -s INT -k 15 130 python3 benchmarks/bench_decode.py --quick --rounds 2 --systems $SYSTEMS --out $OUT/$tree > $OUT/$tree/decode.log 2>&1
  echo "$tree rc $?"
done
date -u +%H:%M:%S
K="split_keys or kv_splits or packed or jax or cuda_graph or reduce_overhead or paged_decode_gpu or varlen_queries or bad_input"
timeout -k 10 110 python3 -m pytest -q -p no:cacheprovider tests/test_kv_cache.py -k "$K" > $OUT/kv_cache_tests.log 2>&1
echo "tests rc $?"; tail -n 3 $OUT/kv_cache_tests.log
for tree in head ds dsm16; do echo "== $tree"; grep "^|" $OUT/$tree/decode.md; done
