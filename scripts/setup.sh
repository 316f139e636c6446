#!/usr/bin/env bash
# One command from a fresh clone to a working toolwire: a virtual environment in .venv with
# toolwire, all its extras (embedded model, HTTP server, Redis) and the bundled plugins.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip

# llama.cpp's default build targets the build machine's newest CPU kernels (AMX), which die with
# SIGILL at the first completion on many CPUs. Build a portable AVX2 binary instead.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}"

.venv/bin/python -m pip install \
    -e ".[dev,local,server,redis]" \
    -e plugins/pharma \
    -e plugins/pydocs

echo "toolwire is installed in .venv; try: .venv/bin/toolwire plugins"
