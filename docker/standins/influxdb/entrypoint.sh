#!/bin/bash
# Entry point of the influxdb stand-in. On the first start (no metadata yet) with
# INFLUXDB_ADMIN_USER set, run influxd on loopback without auth, create the admin user and
# INFLUXDB_DB, stop it; then run the command (influxd) with the configuration file.
set -euo pipefail
if [ "${1:-}" = "influxd" ]; then shift; set -- influxd -config /etc/influxdb/influxdb.conf "$@"; fi
if [ "$1" = "influxd" ] && [ ! -d /var/lib/influxdb/meta ] && [ -n "${INFLUXDB_ADMIN_USER:-}" ]; then
    : "${INFLUXDB_ADMIN_PASSWORD:?INFLUXDB_ADMIN_PASSWORD must be set with INFLUXDB_ADMIN_USER}"
    INFLUXDB_HTTP_AUTH_ENABLED=false INFLUXDB_HTTP_BIND_ADDRESS=127.0.0.1:8086 \
        influxd -config /etc/influxdb/influxdb.conf > /tmp/influxd-init.log 2>&1 &
    init_pid=$!
    for _ in $(seq 1 300); do curl -fsS -o /dev/null http://127.0.0.1:8086/ping && break; sleep 0.1; done
    query() { curl -fsS -o /dev/null -XPOST http://127.0.0.1:8086/query --data-urlencode "q=$1"; }
    password=${INFLUXDB_ADMIN_PASSWORD//\'/\\\'}
    query "CREATE USER \"$INFLUXDB_ADMIN_USER\" WITH PASSWORD '$password' WITH ALL PRIVILEGES"
    if [ -n "${INFLUXDB_DB:-}" ]; then query "CREATE DATABASE \"$INFLUXDB_DB\""; fi
    kill "$init_pid"; wait "$init_pid" || true
fi
exec "$@"
