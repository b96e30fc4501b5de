#!/usr/bin/env bash
# The README's main command: installs what is missing (idempotent), starts the local stack,
# replays an events.json (given with --events, or a generated full-size one) through the whole
# pipeline, waits until every stage has drained, prints a summary and writes PNG plots.
# All options: scripts/demo.sh --help   (e.g. --events tests/data/test_events.json, --keep-running)
set -euo pipefail
cd "$(dirname "$0")/.."
# --help answers at once, without installing anything: the demo's own options once the venv
# exists, this header before the first run.
case " $* " in *" --help "* | *" -h "*)
  if [ -x .venv/bin/python ]; then exec .venv/bin/python -m stacktools.demo --help; fi
  sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
  echo "(every option is listed here once scripts/setup.sh has made .venv)"; exit 0 ;;
esac
scripts/setup.sh
exec .venv/bin/python -m stacktools.demo "$@"
