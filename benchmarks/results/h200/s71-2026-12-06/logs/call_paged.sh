# s71, call 3 (the H200): (1) test_kv_cache.py's 13 GPU tests on HEAD (s70's block_page and s71's
# paged stages have not run on a GPU; s71's first call reached 7 of them in 120 s, one process);
# (2) decode from CUDA graphs, HEAD (paged decode on 3 + 2 stages) against a copy with
# PAGED_DECODE_EXTRA_STAGES = 0, one process each. Predicted: paged 256 at B = 8 from 1.6x dense
# toward ~1.1x; B = 32 within ~5%; pages of 16 (per-key rows) unknown. (3) The torch backward at
# 1k causal read 234.5 TFLOP/s in call 2 against 275.8 in s54's sweep (0303130, 2026-12-04), JAX
# level (247.9 / 251.8): ab.py --cases bwd1k on s54's tree (git archive 0303130 src, carried in
# .scratch/s54) against HEAD, 2 rounds. carry [".whl", ".scratch/s54"]; ~7 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 7 --deadline 150 --log $OUT/kv.log -m gpu tests/test_kv_cache.py 2>&1 | tail -n 12
date -u +%H:%M:%S
mkdir -p /tmp/before && cp -r src /tmp/before/ && sed -i 's/^PAGED_DECODE_EXTRA_STAGES = 2$/PAGED_DECODE_EXTRA_STAGES = 0/' /tmp/before/src/flashx/core/tuning.py
grep -n "^PAGED_DECODE_EXTRA_STAGES" /tmp/before/src/flashx/core/tuning.py src/flashx/core/tuning.py
for tree in before head; do
  if [ $tree = before ]; then SRC=/tmp/before/src; else SRC=$PWD/src; fi
  mkdir -p $OUT/dec_$tree
  PYTHONPATH=/tmp/site:$SRC timeout -s INT -k 10 90 python3 benchmarks/bench_decode.py --quick --rounds 1 --cuda-graphs \
    --systems flashx_dense flashx_paged_256 flashx_paged_16 --out $OUT/dec_$tree > $OUT/dec_$tree/decode.log 2>&1
  echo "decode $tree rc $?"
done
date -u +%H:%M:%S
timeout -s INT -k 10 170 python3 benchmarks/ab.py s54=.scratch/s54/src head=src --cases bwd1k --rounds 2 \
  --json $OUT/bwd1k.json > $OUT/bwd1k.log 2>&1; echo "bwd1k rc $?"
date -u +%H:%M:%S
for tree in before head; do echo "== $tree"; grep "^|" $OUT/dec_$tree/decode.md; done
grep "^|" $OUT/bwd1k.log
