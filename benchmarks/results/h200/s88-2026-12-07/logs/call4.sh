# s88 call 4 (run inline, recorded here; carry [".whl"]): src = dq-store16 with GLUON_DQ_ROUTE widened to
# dense and causal D = 128 (the route this session lands); the GPU tests of the backward, Gluon and lse.
date -u +%T
python3 scripts/gpu_tests.py --processes 8 --deadline 300 --rerun-failed 40 \
  --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu -k "backward or grad or gluon or dq or lse" tests 2>&1 | tail -12; date -u +%T
