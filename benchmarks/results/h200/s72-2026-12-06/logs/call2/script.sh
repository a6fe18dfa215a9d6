# s71 (prepared; the next session's second call; either card, ~6 min; carry [".whl"]).
# page-ahead.patch: a paged key block's table entry loaded one step ahead (a loop-carried page,
# forward.py), and PAGED_DECODE_EXTRA_STAGES back to 0. Offline (Triton 3.6, sm_90) it gives the
# paged steps the dense ones' buffering on three stages: decode 36 / 70 / 138 KiB at D = 64 / 128 /
# 256 (= dense), a prefill chunk of 512 causal queries 64 / 224 / 160 KiB (= dense; before 48 /
# 161 / -), with 16 bytes of stack at D = 128 prefill (dense: 0). CPU: test_kv_cache.py 66 passed
# (9 fail with the next page's offset broken on purpose). Never run on a GPU.
# (1) test_kv_cache.py's GPU tests on the patched tree; (2) ab.py --cases paged (prefill chunks and
# decode through a block table) HEAD (five stages, the table's load in the step) against it,
# 2 rounds, from CUDA graphs. Predicted: decode level (both double-buffer K and V); prefill
# chunks faster on the patched tree (K and V double-buffered, against once on HEAD): +5-15%.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
# The device's copy of the tree is patched in place (a fresh-process test puts the repo's src
# first on its path); HEAD's src is kept in /tmp/head for the timing.
mkdir -p /tmp/head && cp -r src /tmp/head/
patch -s -p1 < benchmarks/results/h200/s71-2026-12-06/logs/page-ahead.patch && grep -c "PAGE_AHEAD" src/flashx/core/forward.py
python3 scripts/gpu_tests.py --processes 7 --deadline 170 --log $OUT/kv.log -m gpu tests/test_kv_cache.py 2>&1 | tail -n 10
date -u +%H:%M:%S
timeout -s INT -k 10 170 python3 benchmarks/ab.py head=/tmp/head/src ahead=src --cases paged --rounds 2 --calls 10 \
  --cuda-graphs --json $OUT/paged.json > $OUT/paged.log 2>&1; echo "paged rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/paged.log
