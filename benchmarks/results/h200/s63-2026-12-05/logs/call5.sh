# s63 (prepared): the decode tile. A one-query decode step runs the long-sequence forward tile
# (128 query rows, 8 warps at D = 128); decode-tile-m16.patch / -m64.patch give calls of at most
# 16 query rows (a packed GQA decode has 4) a 16- or 64-row tile (64 keys, 4 warps, 3 stages;
# offline sm_90, D = 128 packed decode: 154 / 208 registers, no spills, vs 255 for HEAD's 128 x 128,
# 8 warps). bench_decode.py on HEAD's tree and on each patched tree, one
# process each, flashx beside SDPA FA2 in every run (the ratio to FA2 is what compares).
# Trees, built on the CPU box before the call:
#   for m in 16 64; do rm -rf .scratch/dt_m$m; mkdir -p .scratch/dt_m$m; git archive HEAD src | tar -x -C .scratch/dt_m$m
#     (cd .scratch/dt_m$m && patch -p1 < ../../benchmarks/results/h200/s63-2026-12-05/logs/decode-tile-m$m.patch); done
# carry [".whl", ".scratch"]; ~6 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
SYSTEMS="flashx_dense flashx_paged_256 flashx_paged_16 sdpa_flash"
for tree in head dt_m16 dt_m64; do
  src=$PWD/src; [ "$tree" != head ] && src=$PWD/.scratch/$tree/src
  mkdir -p $OUT/$tree
  date -u +%H:%M:%S
  PYTHONPATH=/tmp/site:$src timeout 150 python3 benchmarks/bench_decode.py --quick --systems $SYSTEMS --out $OUT/$tree > $OUT/$tree/decode.log 2>&1
  echo "$tree rc $?"
done
for tree in head dt_m16 dt_m64; do echo "== $tree"; grep "^|" $OUT/$tree/decode.md; done
