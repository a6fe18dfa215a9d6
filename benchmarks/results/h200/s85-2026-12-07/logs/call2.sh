# s85 call 2 (carry [".whl", ".scratch/base"]; ~6 min, any card): the backward's row statistics
# written by dQ's programs (tuning.DQ_ROW_STATS, launched before dK/dV) against HEAD's preprocess
# pass (.scratch/base/src = bceeb9f's src): ab.py on the 1k and 4k backward and GQA, two rounds
# (A B B A) with a control; then each kernel's device time at 1k, both frontends.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
mkdir -p $OUT/ab $OUT/kernels
timeout -s INT -k 10 400 python3 benchmarks/ab.py base=.scratch/base/src new=src --cases bwd1k bwd gqa \
  --rounds 2 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -16 $OUT/ab/ab.log | cut -c1-200
date -u +%H:%M:%S
timeout -s INT -k 10 120 python3 benchmarks/jax_vs_torch.py --n 1024 --cases bwd128 bwd128c \
  > $OUT/kernels/bwd1k.log 2>&1; echo "kernels rc $?"
grep "kernels (median\|device:\|single:" $OUT/kernels/bwd1k.log | cut -c1-220
date -u +%H:%M:%S
