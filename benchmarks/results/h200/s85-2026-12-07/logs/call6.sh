# s85 call 6 (carry [".whl", ".scratch/base"]; ~5 min): on an H200, issue 5's open cells on this
# session's code (s81's next_call2.sh: the D = 64 1k causal forward, the D = 128 1k backward with
# dQ's row statistics, the D = 64 window); on any other card, call 2's A/B again at 1k and GQA,
# three rounds with a control (dQ's row statistics against bceeb9f's preprocess).
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
if [[ "$name" == *H200* ]]; then exec bash benchmarks/results/h200/s81-2026-12-07/logs/next_call2.sh; fi
mkdir -p $OUT/ab
timeout -s INT -k 10 330 python3 benchmarks/ab.py base=.scratch/base/src new=src --cases bwd1k gqa --only bwd \
  --rounds 3 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -6 $OUT/ab/ab.log | cut -c1-200
date -u +%H:%M:%S
