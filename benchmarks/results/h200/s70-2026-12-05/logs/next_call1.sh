# s70 (prepared for the next session; first call; either card): s70's block_page (f087042: a paged
# key block reads one table entry where the page size is a multiple of BLOCK_N; offline the split
# forward 154 -> 116 registers) on a GPU for the first time. (1) test_kv_cache.py's GPU tests and
# the paged decode checks on HEAD; (2) decode from CUDA graphs before and after it, in one
# process each, two rounds: dense and paged 256 / 16 beside FA2 (s70, H100: paged 256 took 28-34%
# longer than dense at B <= 8; pages of 16 take the old per-key path, a control). Predicted: paged
# 256 within ~10% of dense. carry [".whl"]; ~4.5 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
REPO=$PWD
timeout -s INT -k 10 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_kv_cache.py > $OUT/kv_gpu.log 2>&1
echo "kv gpu tests rc $?"; tail -n 2 $OUT/kv_gpu.log
mkdir -p /tmp/before && cp -r src /tmp/before/ && (cd /tmp/before && patch -s -p1 -R < $REPO/benchmarks/results/h200/s70-2026-12-05/logs/block-page.patch) && echo "before tree: block_page reverted"
for tree in before head; do
  if [ $tree = before ]; then SRC=/tmp/before/src; else SRC=$REPO/src; fi
  mkdir -p $OUT/dec_$tree
  PYTHONPATH=/tmp/site:$SRC timeout -s INT -k 10 100 python3 benchmarks/bench_decode.py --quick --rounds 2 --cuda-graphs \
    --systems flashx_dense flashx_paged_256 flashx_paged_16 sdpa_flash --out $OUT/dec_$tree > $OUT/dec_$tree/decode.log 2>&1
  echo "decode $tree rc $?"
done
date -u +%H:%M:%S
for tree in before head; do echo "== $tree"; grep "^|" $OUT/dec_$tree/decode.md; done
