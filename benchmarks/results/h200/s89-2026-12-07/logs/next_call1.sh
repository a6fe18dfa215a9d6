# Prepared in s89 for the next session (~8 min; carry [".whl", ".scratch/head"]). Make the tree first:
#   mkdir -p .scratch/head; git archive 2606c6a src | tar -x -C .scratch/head
# 1. The 4 GPU tests s89's whole run did not reach (its call 1: 196 passed, none failed).
# 2. On an H200, s88's route (the Gluon dQ for every D = 128 backward) against main 2606c6a (the tl
#    dQ at dense and causal); s88's H100 read 1.028 / 1.055 at 1k, 1.052 / 0.995 at 4k.
set -u
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
mkdir -p $OUT/ab
timeout -s INT -k 10 200 python3 -m pytest -q -rfE -p no:cacheprovider \
  $(cat benchmarks/results/h200/s89-2026-12-07/logs/call1/tests_gpu.unreached.txt) > $OUT/unreached.log 2>&1
echo "unreached tests rc $?"; tail -3 $OUT/unreached.log
date -u +%H:%M:%S
timeout -s INT -k 10 240 python3 benchmarks/ab.py head=.scratch/head/src new=src \
  --cases bwd1k bwd variants gqa --only bwd --rounds 2 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -14 $OUT/ab/ab.log | cut -c1-200
date -u +%H:%M:%S
