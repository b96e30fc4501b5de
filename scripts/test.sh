#!/usr/bin/env bash
# Runs the whole test suite against the real local stack (installed and started as needed) and
# the compose stack in containers (podman and Compose v2 installed as needed; docs/containers.md).
# Extra arguments go to pytest, e.g. scripts/test.sh -k transactions
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup-containers.sh
exec .venv/bin/python -m pytest "$@"
