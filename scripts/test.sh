#!/usr/bin/env bash
# Runs the whole test suite against the real local stack (installed and started as needed).
# Extra arguments go to pytest, e.g. scripts/test.sh -k transactions
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
