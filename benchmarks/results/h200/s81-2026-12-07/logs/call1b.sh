# s81 call 1b (call 1 without its tests, for a short budget; any card; ~6 min): the D = 64 causal window 1024 forward (16k, H = 32)
# on the tl kernel (HEAD's route) against a tree that routes it to the Gluon overlap tile D = 64
# block maps take (w64_tree.sh; level in s36, 2026-12-02, before v0.48-v0.50), its float64 checks
# first.
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
mkdir -p $OUT/w64; bash benchmarks/results/h200/s81-2026-12-07/logs/w64_tree.sh
(cd /tmp/w64 && PYTHONPATH=/tmp/site:/tmp/w64/src timeout -s INT -k 10 120 python3 -m pytest -q -m gpu \
  tests/test_variants.py tests/test_variants_jax.py -k "gluon_forward_windows_and_maps and d64" > $OUT/w64/tests.log 2>&1; \
  echo "w64 tests rc $?"; tail -3 $OUT/w64/tests.log)
timeout -s INT -k 10 150 python3 benchmarks/ab.py head=src w64=/tmp/w64/src --cases variants-d \
  --only "fwd window B1 N16384 H32 D64" --rounds 2 --control > $OUT/w64/ab.log 2>&1; echo "w64 rc $?"
tail -6 $OUT/w64/ab.log
PYTHONPATH=/tmp/site:/tmp/w64/src timeout -s INT -k 10 100 python3 benchmarks/bench_variants.py --quick --d 64 \
  --cases window --out $OUT/w64 > $OUT/w64/variants.log 2>&1; echo "w64 variants rc $?"
grep "^|" $OUT/w64/variants.md | head -6
date -u +%H:%M:%S
