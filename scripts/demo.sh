#!/usr/bin/env bash
# Installs everything (idempotent) and runs the main job. For now: bring the local stack up
# (Kafka, Mosquitto, InfluxDB, Prometheus), provision the topics and print the stack's status.
# Stop everything with: .venv/bin/python -m streamkit.stack down
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/python -m streamkit.stack up
echo
.venv/bin/python -m streamkit.topics
