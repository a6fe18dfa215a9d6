# s85 call 1 (carry [".whl"]): on an H200, issue 5's open cells (s81's next_call2.sh, ~3.5 min);
# on any card, then, the D = 128 1k backward's kernels one by one (jax_vs_torch.py prints each
# kernel's median device time): how much of the backward the row-statistics preprocess (a pass
# over O and dO) takes at 1k, where the non-causal backward sits at the 1.0x FlexAttention line.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
if [[ "$name" == *H200* ]]; then bash benchmarks/results/h200/s81-2026-12-07/logs/next_call2.sh; fi
mkdir -p $OUT/kernels
timeout -s INT -k 10 150 python3 benchmarks/jax_vs_torch.py --n 1024 --cases bwd128 bwd128c \
  > $OUT/kernels/bwd1k.log 2>&1; echo "kernels rc $?"
grep -v "^#" $OUT/kernels/bwd1k.log | tail -30 | cut -c1-200
date -u +%H:%M:%S
