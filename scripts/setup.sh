#!/usr/bin/env bash
# Create .venv (if missing) and install flashx into it with torch, JAX and pytest; sourced by
# demo.sh and test.sh from the repo root. Works on a machine with Python 3.11 and no GPU.
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
