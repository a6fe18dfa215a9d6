# s64 (prepared): the decode step's forward on four trees, bench_decode.py --quick on each (one
# process a tree, SDPA FA2 in every run: the ratio to FA2 is what compares across trees):
#   head   this commit: dense 16-bit decode takes the Gluon forward (packed, one program a tile,
#          unsplit); paged decode the split tl forward with the long-sequence tile (128 x 128);
#   dt_m16 / dt_m64  s63's decode-tile patches (a 16- / 64-row query tile for calls of <= 16 rows);
#   ds     decode-dense-split.patch: a call whose tl forward splits its keys leaves the Gluon route
#          (dense decode then splits as paged decode does).
# Trees, built on the CPU box before the call:
#   for m in 16 64; do rm -rf .scratch/dt_m$m; mkdir -p .scratch/dt_m$m; git archive HEAD src | tar -x -C .scratch/dt_m$m
#     (cd .scratch/dt_m$m && patch -p1 < ../../benchmarks/results/h200/s63-2026-12-05/logs/decode-tile-m$m.patch); done
#   rm -rf .scratch/ds; mkdir -p .scratch/ds; git archive HEAD src | tar -x -C .scratch/ds
#   (cd .scratch/ds && patch -p1 < ../../benchmarks/results/h200/s64-2026-12-05/logs/decode-dense-split.patch)
# carry [".whl", ".scratch/dt_m16", ".scratch/dt_m64", ".scratch/ds"]; ~6 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
SYSTEMS="flashx_dense flashx_paged_256 sdpa_flash"
for tree in head dt_m16 dt_m64 ds; do
  src=$PWD/src; [ "$tree" != head ] && src=$PWD/.scratch/$tree/src
  mkdir -p $OUT/$tree
  date -u +%H:%M:%S
  PYTHONPATH=/tmp/site:$src timeout -s INT -k 15 110 python3 benchmarks/bench_decode.py --quick --systems $SYSTEMS --out $OUT/$tree > $OUT/$tree/decode.log 2>&1
  echo "$tree rc $?"
done
for tree in head dt_m16 dt_m64 ds; do echo "== $tree"; grep "^|" $OUT/$tree/decode.md; done
