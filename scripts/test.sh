#!/usr/bin/env bash
# Runs the whole test suite against the real local stack (installed and started as needed) and
# the compose stack in containers (podman and Compose v2 installed as needed; docs/containers.md).
# Extra arguments go to pytest, e.g. scripts/test.sh -k transactions (pytest's own options:
# .venv/bin/python -m pytest --help). Tiers: docs/testing.md. Two workers, each with a local stack
# of its own, the longest modules first (tests/conftest.py); -n 0 runs all in this process.
set -euo pipefail
# --help answers at once (this header), without installing anything.
case " $* " in *" --help "* | *" -h "*)
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
esac
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/setup-containers.sh
exec .venv/bin/python -m pytest -n 2 --dist loadgroup --no-loadscope-reorder "$@"
