#!/usr/bin/env bash
# The gate CI runs before the tests: ruff's lint (import order included), ruff's formatter in check
# mode and mypy, all configured in pyproject.toml. Installs the pinned tools first (scripts/setup.sh).
#   scripts/lint.sh          check the whole tree
#   scripts/lint.sh --fix    apply ruff's safe fixes and format in place, then check
set -euo pipefail
case "${1:-}" in
  -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ "${1:-}" = "--fix" ]; then
  .venv/bin/ruff check --fix .
  .venv/bin/ruff format .
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
