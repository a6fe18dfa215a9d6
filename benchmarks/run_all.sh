#!/usr/bin/env bash
# Run flashx's four benchmarks one after the other and print their tables:
#   bench_forward.py (flashx beside SDPA FA2/cuDNN, FlexAttention, jax.nn cuDNN, Pallas GPU; the
#   short-sequence shapes), bench_backward.py (the same peers, fwd+bwd and bwd only),
#   bench_variants.py (window, documents, GQA) and bench_compile.py (first-call compile cost in
#   fresh processes, and no recompile at a new sequence length).
#
#   bash benchmarks/run_all.sh [--quick | --full] [ARGS...]
#
# --quick (the default): each script's --quick mode, about eight minutes in all on an H200 (compiling,
#   and three settled timings of each system and shape: --rounds); each script gets a soft time
#   budget (--budget-s, cases not started once it is spent are skipped and listed) and a hard
#   timeout (SIGTERM: the script writes what it measured), both cut from a total of
#   FLASHX_BENCH_TOTAL_S seconds (default 540, inside the GPU tool's 10 minutes): at most 165 s
#   forward, 185 s backward, 120 s variants, 70 s compile, each budget 25 s under its timeout.
# --full: the full sweeps, without budgets or timeouts (much longer than the GPU tool's 10 minutes:
#   run the scripts one per call instead).
# ARGS go to every script after the mode (e.g. --dtype fp16, --out DIR, --device cpu).
#
# On the H200, after installing jax-triton, e.g.:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site ../shared/wheels/jax_triton-0.3.1-py3-none-any.whl
#   PYTHONPATH=/tmp/site bash benchmarks/run_all.sh --quick
# src/ is put on PYTHONPATH (flashx need not be installed). One script failing does not stop the
# others; each one's status is reported. Full logs: LOG_DIR (default benchmarks/results/h200/logs).
# If $OUT is set (the GPU tool's folder of files to bring back), the results and logs this run
# wrote go there as one archive, results.tar.gz (relative to the results folder).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode="--quick"
case "${1:-}" in
  --quick) shift ;;
  --full) mode=""; shift ;;
  -h|--help) sed -n '2,/^set -u/p' "benchmarks/run_all.sh" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
extra=("$@")

PYTHON="${PYTHON:-python3}"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONUNBUFFERED=1

# Where the scripts write (the last --out in ARGS, else their default).
results="benchmarks/results/h200"
for ((i = 0; i < ${#extra[@]}; i++)); do
  if [[ "${extra[i]}" == "--out" && $((i + 1)) -lt ${#extra[@]} ]]; then results="${extra[i + 1]}"; fi
  if [[ "${extra[i]}" == --out=* ]]; then results="${extra[i]#--out=}"; fi
  if [[ "${extra[i]}" == "--device" && "${extra[i + 1]:-}" == "cpu" ]] || [[ "${extra[i]}" == "--device=cpu" ]]; then
    results="${TMPDIR:-/tmp}/flashx-bench-cpu"  # the scripts' default for debug runs (unless --out)
  fi
done
for ((i = 0; i < ${#extra[@]}; i++)); do  # --out wins over the --device cpu default
  if [[ "${extra[i]}" == "--out" && $((i + 1)) -lt ${#extra[@]} ]]; then results="${extra[i + 1]}"; fi
done
LOG_DIR="${LOG_DIR:-$results/logs}"
mkdir -p "$LOG_DIR"

scripts=(bench_forward bench_backward bench_variants bench_compile)
names=(forward backward variants compile)
caps=(165 185 120 70)  # hard timeout per script in --quick mode, seconds (then cut to fit the total)
TOTAL="${FLASHX_BENCH_TOTAL_S:-540}"
MIN_S=40           # kept for each script still to run
start_all=$(date +%s)
declare -a status secs

for idx in "${!scripts[@]}"; do
  script="${scripts[idx]}"
  log="$LOG_DIR/${names[idx]}.log"
  cmd=("$PYTHON" "benchmarks/$script.py")
  limit=0
  if [[ -n "$mode" ]]; then
    elapsed=$(( $(date +%s) - start_all ))
    later=$(( ${#scripts[@]} - idx - 1 ))
    limit=$(( TOTAL - elapsed - later * MIN_S ))
    (( limit > caps[idx] )) && limit=${caps[idx]}
    (( limit < MIN_S )) && limit=$MIN_S
    budget=$(( limit - 25 ))
    cmd+=("$mode" --budget-s "$budget")
  fi
  cmd+=("${extra[@]}")
  note=""
  (( limit > 0 )) && note=" (timeout ${limit}s)"
  echo "=== ${names[idx]}: ${cmd[*]}$note  [log: $log]"
  t0=$(date +%s)
  if (( limit > 0 )) && command -v timeout >/dev/null; then
    timeout -s TERM -k 15 "$limit" "${cmd[@]}" >"$log" 2>&1
  else
    "${cmd[@]}" >"$log" 2>&1
  fi
  rc=$?
  secs[idx]=$(( $(date +%s) - t0 ))
  case $rc in
    0) status[idx]="ok" ;;
    124) status[idx]="timed out after ${limit}s (partial results, if any, were written)" ;;
    137) status[idx]="killed after ${limit}s+15s (no results written)" ;;
    *) status[idx]="FAILED (exit code $rc)" ;;
  esac
  echo "    ${status[idx]} in ${secs[idx]}s"
  if [[ $rc -ne 0 ]]; then
    echo "    last lines of $log:"
    tail -n 12 "$log" | cut -c1-240 | sed 's/^/    | /'
  fi
done

if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then
  # One archive of what this run wrote (the GPU tool brings back only a few files per call).
  (cd "$results" && find . -type f -newermt "@$((start_all - 1))" -print0 | tar -czf "$OUT/results.tar.gz" --null -T -) \
    && echo "this run's results and logs: \$OUT/results.tar.gz"
fi

# The tables last (the GPU tool returns the end of the output): the environment once, then each
# report without its header lines, long lines cut.
echo
echo "################ summary (total $(( $(date +%s) - start_all ))s) ################"
shown_env=0
for idx in "${!scripts[@]}"; do
  md="$results/${names[idx]}.md"
  echo
  echo "=== ${names[idx]}: ${status[idx]}, ${secs[idx]}s"
  if [[ ! -f "$md" ]]; then
    echo "(no $md)"
    continue
  fi
  if (( shown_env == 0 )); then
    grep -E '^- (date|GPU|versions):' "$md" | cut -c1-300
    shown_env=1
  fi
  if (( $(stat -c %Y "$md" 2>/dev/null || echo 0) < start_all )); then
    echo "(stale: $md was not written by this run)"
  fi
  # From the first section heading or table on (the settings' notes stay in the file).
  awk 'started || /^## |^\|/ { started = 1; if ($0 != "") print }' "$md" | cut -c1-260
done
exit 0
