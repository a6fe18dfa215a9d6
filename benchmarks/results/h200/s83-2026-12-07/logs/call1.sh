# Prepared in s82 for the next session's first call (~8 min; carry [".whl"]). It runs the one of
# s81's two prepared calls that suits the card that comes: on an H200, issue 5's cells and the D = 64
# window checks (s81's next_call2.sh); on any other card, the whole GPU suite (s81's next_call1.sh).
# If it got an H200, run s81's next_call1.sh (the suite) next. No GPU ran in s82.
set -u
S81=benchmarks/results/h200/s81-2026-12-07/logs
if [[ "$(nvidia-smi --query-gpu=name --format=csv,noheader)" == *H200* ]]; then
  exec bash $S81/next_call2.sh
fi
exec bash $S81/next_call1.sh
