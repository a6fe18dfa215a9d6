# s87 call 2 (carry [".whl", ".scratch/base", ".scratch/wide"]; ~8 min): the Gluon dQ writing the row
# statistics (branch gluon-dq-stats, src) against HEAD 5385386 (.scratch/base/src): its GPU tests
# first, then ab.py with wide = src with GLUON_DQ_ROUTE widened to dense and causal D = 128 (the
# Gluon dQ with its statistics everywhere at D = 128), then each kernel's device time at 1k.
set -u
name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$name"; date -u +%H:%M:%S
mkdir -p $OUT/tests $OUT/ab $OUT/kernels
timeout -s INT -k 10 150 python3 -m pytest -q -m gpu -p no:cacheprovider \
  -k "gluon_dq_writes or gluon_dkdv_through or gluon_backward or row_stat" \
  tests/test_torch.py tests/test_jax.py > $OUT/tests/gpu.log 2>&1; echo "tests rc $?"
tail -4 $OUT/tests/gpu.log | cut -c1-300
date -u +%H:%M:%S
timeout -s INT -k 10 300 python3 benchmarks/ab.py base=.scratch/base/src stats=src wide=.scratch/wide/src \
  --cases bwd1k bwd variants gqa --only bwd --rounds 2 --control > $OUT/ab/ab.log 2>&1; echo "ab rc $?"
tail -16 $OUT/ab/ab.log | cut -c1-220
date -u +%H:%M:%S
for t in base wide; do
  PYTHONPATH=/tmp/site:$PWD/.scratch/$t/src timeout -s INT -k 10 90 python3 benchmarks/jax_vs_torch.py --n 1024 \
    --cases bwd128 bwd128c > $OUT/kernels/$t.log 2>&1; echo "$t rc $?"
  grep "kernels (median" -A 6 $OUT/kernels/$t.log | cut -c1-200
done
date -u +%H:%M:%S
