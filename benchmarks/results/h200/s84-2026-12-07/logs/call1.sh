# s84 call 1 (carry [".whl"]; ~9 min): on an H200, issue 5's open cells (s81's next_call2.sh: the
# D = 64 1k causal forward, the D = 128 1k backward, the D = 64 window); on any other card (the
# H100s that s81-s84's calls got), the quick suite on today's code, which puts every target of the
# issue on one run of one card (the last such run: 2026-12-04, H200, before s58-s83's changes).
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader)
if [[ "$name" == *H200* ]]; then exec bash benchmarks/results/h200/s81-2026-12-07/logs/next_call2.sh; fi
echo "$name: the quick suite"; date -u +%H:%M:%S
FLASHX_BENCH_TOTAL_S=520 bash benchmarks/run_all.sh --quick --out /tmp/quick
date -u +%H:%M:%S
