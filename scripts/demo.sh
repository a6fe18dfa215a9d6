#!/usr/bin/env bash
# Set up .venv (if missing) and run the demo: python examples/demo.py.
# Works on a fresh clone with Python 3.11 and no GPU (Triton's interpreter, tiny shapes, about a
# minute); with a CUDA GPU it also prints speeds.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

source scripts/setup.sh

exec .venv/bin/python examples/demo.py
