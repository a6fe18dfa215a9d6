#!/usr/bin/env bash
# Set up .venv (if missing) and run the demo: python examples/demo.py.
# Works on a fresh clone with Python 3.11 and no GPU (Triton's interpreter, tiny shapes, about a
# minute); with a CUDA GPU it also prints speeds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [[ ! -x .venv/bin/python ]]; then
  echo "creating .venv with $("$PYTHON" --version 2>&1)"
  "$PYTHON" -m venv .venv
fi
# torch first, pinned: this exact version resolves to the CPU build on local disk, where a bare
# `torch` (or the extra's torch>=2.5) would fetch a multi-GB CUDA build.
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[torch,jax,test]"

exec .venv/bin/python examples/demo.py
