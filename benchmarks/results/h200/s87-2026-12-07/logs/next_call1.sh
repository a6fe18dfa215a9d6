# Prepared in s87 for the next session (any card, an H200 preferred; ~8 min; carry [".whl"]): the whole
# GPU-marked suite on the final code. s87's Gluon dQ with the row statistics (60b005d) ran 20 GPU
# tests on an H100; its JAX test (test_gpu_gluon_dq_row_statistics), the check-script dQ launch
# (b5ff1d3) and 6 JAX through-the-plan cases never ran; s75-s87's work has never run on an H200.
set -u
G=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); echo "$G"; date -u +%H:%M:%S
python3 scripts/gpu_tests.py --processes 8 --deadline 440 --rerun-failed 60 \
  --balance benchmarks/results/h200/s80-2026-12-06/logs/call1/tests_gpu.durations.json \
  --log $OUT/tests_gpu.log -m gpu tests 2>&1 | tail -12
date -u +%H:%M:%S
