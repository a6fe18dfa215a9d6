# Prepared in s88 for the next session (any card, an H200 preferred; ~8 min; carry [".whl"]): the whole
# GPU-marked suite on the final code. s88's call 1 ran it on dq-store16 with main's routes (200 passed);
# the widened GLUON_DQ_ROUTE ran only the backward's tests (call 4, 126 passed), and the compile-count
# test's new Gluon backward kernels never ran on a GPU.
exec bash benchmarks/results/h200/s88-2026-12-07/logs/call1.sh
