# s67 (prepared): the D = 128 backward sweep with the in-turns timing (s59's next_call3 part 1),
# then the decode step on HEAD and the split-dense tree (s65's callE, head and ds only, one round).
# Trees: L=benchmarks/results/h200; rm -rf .scratch/ds; mkdir -p .scratch/ds; git archive HEAD src | tar -x -C .scratch/ds
#   (cd .scratch/ds && patch -p1 < ../../$L/s64-2026-12-05/logs/decode-dense-split.patch)
# carry [".whl", ".scratch/ds"]; ~8 min.
set -u
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
date -u +%H:%M:%S
R=/tmp/c2; mkdir -p $R/bwd
timeout -s TERM 200 python3 benchmarks/bench_backward.py --quick --budget-s 190 --d 128 --n 1024 4096 16384 \
  --no-memory --out $R/bwd > $R/bwd.log 2>&1; echo "bwd rc $?"
date -u +%H:%M:%S
for tree in head ds; do
  src=$PWD/src; [ "$tree" != head ] && src=$PWD/.scratch/$tree/src
  mkdir -p $R/$tree
  PYTHONPATH=/tmp/site:$src timeout -s INT -k 15 130 python3 benchmarks/bench_decode.py --quick \
    --systems flashx_dense flashx_paged_256 sdpa_flash --out $R/$tree > $R/$tree/decode.log 2>&1
  echo "decode $tree rc $?"
done
date -u +%H:%M:%S
tar -czf $OUT/call2.tar.gz -C $R .
grep -A8 "^| D" $R/bwd/*.md | head -12; for t in head ds; do echo "== $t"; grep "^|" $R/$t/decode.md; done
