# s83 call 3 (after the H100's suite and cells): issue 5's cells and the D = 64 window route on an
# H200 only (s81's next_call2.sh, ~3.5 min on a warm H100); on any other card it stops at once,
# since calls 1 and 2 already ran this session's H100 work.
set -u
if [[ "$(nvidia-smi --query-gpu=name --format=csv,noheader)" != *H200* ]]; then
  nvidia-smi --query-gpu=name --format=csv,noheader; echo "not an H200: nothing to run"; exit 0
fi
exec bash benchmarks/results/h200/s81-2026-12-07/logs/next_call2.sh
