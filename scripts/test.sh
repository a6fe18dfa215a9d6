#!/usr/bin/env bash
# Set up .venv (if missing) and run flashx's tests: python -m pytest -q -ra -n WORKERS tests [extra args],
# in FLASHX_TEST_WORKERS pytest-xdist processes (default 2: the interpreter holds one core each;
# on CI's 2 cores 12 minutes of tests where one process took 19, 2026-12-07).
# Meant for a fresh clone on a machine with Python 3.11 and no GPU (CI runs it through .ci/run);
# without a GPU the kernels run through Triton's interpreter. Extra arguments go to pytest:
#   bash scripts/test.sh -k causal -x
#   FLASHX_TEST_WORKERS=0 bash scripts/test.sh -x   # one process (0: no xdist workers)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

source scripts/setup.sh

status=0
.venv/bin/python -m pytest -q -ra -n "${FLASHX_TEST_WORKERS:-2}" tests "$@" || status=$?
if [[ $status -eq 5 ]]; then
  echo "test.sh: pytest collected no tests (exit code 5): counted as a failure" >&2
fi
exit "$status"
