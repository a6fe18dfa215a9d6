# s64 (prepared): decode's host time. Trees: head (this commit: the packed fast path, NOTES v0.57
# item 6) and .scratch/dd (decode-device-descriptors.patch: a decode-shaped call, <= 16 query rows,
# takes device-built TMA descriptors, as short calls do, rather than four built on the host).
# host_profile.py (host us a call, no sync, dense B = 1 decode) and bench_decode.py --quick
# (dense and FA2) on each. Tree: rm -rf .scratch/dd; mkdir -p .scratch/dd; git archive HEAD src | tar -x -C .scratch/dd
#   (cd .scratch/dd && patch -p1 < ../../benchmarks/results/h200/s64-2026-12-05/logs/decode-device-descriptors.patch)
# carry [".whl", ".scratch/dd"]; ~4 min.
set -u
for tree in head dd; do
  src=$PWD/src; [ "$tree" != head ] && src=$PWD/.scratch/$tree/src
  mkdir -p $OUT/$tree
  date -u +%H:%M:%S
  PYTHONPATH=/tmp/site:$src timeout 45 python3 benchmarks/results/h200/s64-2026-12-05/logs/host_profile.py > $OUT/$tree/host.log 2>&1
  echo "$tree host: $(head -n 1 $OUT/$tree/host.log)"
  PYTHONPATH=/tmp/site:$src timeout -s INT -k 10 60 python3 benchmarks/bench_decode.py --quick --systems flashx_dense sdpa_flash \
    --out $OUT/$tree > $OUT/$tree/decode.log 2>&1
  echo "$tree decode rc $?"
done
for tree in head dd; do echo "== $tree"; grep "^|" $OUT/$tree/decode.md; done
