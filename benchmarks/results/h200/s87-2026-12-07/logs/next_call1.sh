# Prepared in s87 for the next session (any card, an H200 preferred; ~8 min; carry [".whl"]): the whole
# GPU-marked suite on the final code, as this session's call1.sh (which never got a machine). s87's
# Gluon dQ with the row statistics (60b005d) ran 20 GPU tests on an H100; its JAX test
# (test_gpu_gluon_dq_row_statistics), the check-script dQ launch (b5ff1d3), 6 JAX through-the-plan
# cases and review commit 19cfb92's kernel source never ran on a GPU; s75-s87's work never on an H200.
exec bash benchmarks/results/h200/s87-2026-12-07/logs/call1.sh
