# s71: split tl forward vs unsplit Gluon for mid-sized calls (never timed since s68's split route,
# ac92175, sent calls of fewer tiles than 80% of the SMs to the split tl forward). ab.py --cases mid
# (B = 1, D = 128, causal and not, splits 2-4 on 132 SMs) on HEAD against a copy whose
# tuning.KV_SPLIT_MAX is 1 (every such call the unsplit Gluon forward), 2 rounds A B B A, 10 calls
# back to back per timing. Predicted: split >= unsplit where the split doubles or quadruples the
# programs of a grid that fills under 40% of the SMs; near parity at (4, 2k) (64 -> 128 programs).
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
mkdir -p /tmp/unsplit && cp -r src /tmp/unsplit/ && sed -i 's/^KV_SPLIT_MAX = 16$/KV_SPLIT_MAX = 1/' /tmp/unsplit/src/flashx/core/tuning.py
grep -n "^KV_SPLIT_MAX" /tmp/unsplit/src/flashx/core/tuning.py
timeout -s INT -k 10 300 python3 benchmarks/ab.py split=src unsplit=/tmp/unsplit/src --cases mid --rounds 2 --calls 10 \
  --json $OUT/mid.json > $OUT/mid.log 2>&1; echo "mid rc $?"
date -u +%H:%M:%S
grep "^|" $OUT/mid.log
