# s86 call 1 (carry [".whl", ".scratch/cur", ".scratch/pre", ".scratch/noO", ".scratch/nostore", ".scratch/late"]):
# on an H200 first issue 5's owed cells (s81's next_call2.sh, ~3.5 min); on any card, where the D = 128
# 1k dQ kernel's +52 us (v0.78) comes from: each kernel's device time (jax_vs_torch.py) in five trees,
# cur = HEAD (dQ writes the row statistics), pre = DQ_ROW_STATS off (the preprocess pass), noO = no O
# load (delta from dO alone: wrong values, timing only), nostore = statistics not stored (timing only),
# late = the statistics stored after dQ's loop; then ab.py cur / late on the 1k backward.
set -u
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
if [[ "$name" == *H200* ]]; then
  bash benchmarks/results/h200/s81-2026-12-07/logs/next_call2.sh
fi
mkdir -p $OUT/kernels $OUT/ab
for t in cur pre noO nostore late; do
  PYTHONPATH=/tmp/site:$PWD/.scratch/$t/src timeout -s INT -k 10 100 python3 benchmarks/jax_vs_torch.py --n 1024 \
    --cases bwd128 bwd128c > $OUT/kernels/$t.log 2>&1; echo "$t rc $?"
  grep "torch kernels (median" $OUT/kernels/$t.log | cut -c1-200
done
date -u +%H:%M:%S
timeout -s INT -k 10 200 python3 benchmarks/ab.py cur=.scratch/cur/src late=.scratch/late/src --cases bwd1k \
  --rounds 3 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -5 $OUT/ab/ab.log | cut -c1-200
date -u +%H:%M:%S
