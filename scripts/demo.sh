#!/usr/bin/env bash
# The README's main command: installs what is missing (idempotent), starts the local stack,
# replays an events.json (given with --events, or a generated full-size one) through the whole
# pipeline, waits until every stage has drained, prints a summary and writes PNG plots.
# All options: scripts/demo.sh --help   (e.g. --events tests/data/test_events.json, --keep-running)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/python -m stacktools.demo "$@"
