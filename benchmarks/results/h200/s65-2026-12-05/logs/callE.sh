# s65 (prepared; this session had 54 s of device time, no machine): the settled decode rerun
# (NOTES v0.57 item 6 asked for it) on three trees, three rounds each, SDPA FA2 in every run:
#   head  this commit (dense 16-bit decode: Gluon forward, packed, one program a tile, unsplit);
#   ds    decode-dense-split.patch: a call whose tl forward splits its keys (SPLIT_KEYS) leaves
#         the Gluon route, so dense decode splits as paged decode does (the B = 1, 16k lever);
#   dd    decode-device-descriptors.patch: calls of < 64 query rows take device TMA descriptors
#         (host time: session 64 read 94.1 against 98.8 us a call, one round).
# Then the test_kv_cache.py cases that session 64's call did not reach (split keys, packed, JAX,
# CUDA graphs, reduce-overhead), on the head tree and on ds (whose dense decode splits).
# Trees, built on the CPU box before the call:
#   for t in ds dd; do rm -rf .scratch/$t; mkdir -p .scratch/$t; git archive HEAD src | tar -x -C .scratch/$t
#     (cd .scratch/$t && patch -p1 < ../../benchmarks/results/h200/s65-2026-12-05/logs/decode-$([ $t = ds ] && echo dense-split || echo device-descriptors).patch); done
# carry [".whl", ".scratch/ds", ".scratch/dd"]; ~9 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
SYSTEMS="flashx_dense flashx_paged_256 sdpa_flash"
for tree in head ds dd; do
  src=$PWD/src; [ "$tree" != head ] && src=$PWD/.scratch/$tree/src
  mkdir -p $OUT/$tree
  date -u +%H:%M:%S
  PYTHONPATH=/tmp/site:$src timeout -s INT -k 15 120 python3 benchmarks/bench_decode.py --quick --rounds 3 --systems $SYSTEMS --out $OUT/$tree > $OUT/$tree/decode.log 2>&1
  echo "$tree rc $?"
done
K="split_keys or kv_splits or packed or jax or cuda_graph or reduce_overhead or paged_decode_gpu or varlen_queries or bad_input"
for tree in head ds; do
  src=$PWD/src; [ "$tree" != head ] && src=$PWD/.scratch/$tree/src
  date -u +%H:%M:%S
  PYTHONPATH=/tmp/site:$src timeout -k 10 110 python3 -m pytest -q -x -p no:cacheprovider tests/test_kv_cache.py -k "$K" > $OUT/$tree/kv_cache_tests.log 2>&1
  echo "$tree tests rc $?"; tail -n 3 $OUT/$tree/kv_cache_tests.log
done
for tree in head ds dd; do echo "== $tree"; grep "^|" $OUT/$tree/decode.md; done
