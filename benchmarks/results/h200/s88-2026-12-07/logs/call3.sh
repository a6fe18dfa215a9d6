# s88 call 3 (run inline, recorded here; carry [".whl", ".scratch/head", ".scratch/wide16"]): 3 rounds of
# head (main 2606c6a) against wide16 (dq-store16 with GLUON_DQ_ROUTE widened to dense and causal D = 128)
# at the D = 128 dense backwards, then head's kernel times at 1k.
mkdir -p $OUT/ab $OUT/kernels; nvidia-smi --query-gpu=name --format=csv,noheader; date -u +%T
timeout -s INT -k 10 250 python3 benchmarks/ab.py head=.scratch/head/src wide16=.scratch/wide16/src --cases bwd1k bwd \
  --only D128 --rounds 3 --control > $OUT/ab/ab3.log 2>&1; echo "ab rc $?"; tail -7 $OUT/ab/ab3.log | cut -c1-200; date -u +%T
PYTHONPATH=/tmp/site:$PWD/.scratch/head/src timeout -s INT -k 10 80 python3 benchmarks/jax_vs_torch.py --n 1024 \
  --cases bwd128 bwd128c > $OUT/kernels/head.log 2>&1; echo "head rc $?"
grep "kernels (median\|device:" $OUT/kernels/head.log | cut -c1-200; date -u +%T
