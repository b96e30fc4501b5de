#!/bin/bash
# Entry point of the compose `influxdb` service (influxdb:1.8.10 image, which runs influxd as
# root): HTTPS with the `certs` job's certificate, auth on, and the first admin created where
# no stranger can get in first (the launcher's way, stacktools/stack/influx_bootstrap.py).
#
# InfluxDB 1.x lets anyone create a user WITH ALL PRIVILEGES while it has none. So, on a data
# directory without its admin, a bootstrap run comes first: its HTTP service also listens on a
# Unix socket in a 0700 directory, its TCP listeners are on ephemeral loopback ports and speak
# only TLS with no protocol version allowed (minimum above maximum: every handshake fails); the
# admin is created through the socket, with the statement read from a 0600 file (no password on
# any command line). Then influxd runs for real. INFLUXDB_* variables override influxdb.conf.
set -euo pipefail
umask 077

: "${INFLUX_ADMIN_PASSWORD:?INFLUX_ADMIN_PASSWORD must be set (see .env.example)}"
case "$INFLUX_ADMIN_PASSWORD" in change-me) echo "INFLUX_ADMIN_PASSWORD is still the placeholder change-me: run python3 -m stacktools.compose.env" >&2; exit 1;; esac
[ "${#INFLUX_ADMIN_PASSWORD}" -ge 12 ] || { echo "INFLUX_ADMIN_PASSWORD is shorter than 12 characters" >&2; exit 1; }
ADMIN="${INFLUX_ADMIN_USER:-admin}"
TLS_DIR="${INFLUX_TLS_DIR:-/tls}"
DATA_DIR="${INFLUX_DATA_DIR:-/var/lib/influxdb}"
MARKER="$DATA_DIR/admin-created"

export INFLUXDB_REPORTING_DISABLED=true
export INFLUXDB_HTTP_AUTH_ENABLED=true
export INFLUXDB_HTTP_HTTPS_ENABLED=true
export INFLUXDB_HTTP_HTTPS_CERTIFICATE="$TLS_DIR/server.pem"
export INFLUXDB_HTTP_HTTPS_PRIVATE_KEY="$TLS_DIR/server-key.pem"
export INFLUXDB_TLS_MIN_VERSION=tls1.2

if [ ! -e "$MARKER" ]; then
    bootstrap="$(mktemp -d /tmp/influxd-bootstrap.XXXXXX)"  # 0700
    socket="$bootstrap/influxd.sock"
    INFLUXDB_BIND_ADDRESS=127.0.0.1:0 INFLUXDB_HTTP_BIND_ADDRESS=127.0.0.1:0 \
        INFLUXDB_HTTP_FLUX_ENABLED=false INFLUXDB_TLS_MIN_VERSION=tls1.3 \
        INFLUXDB_TLS_MAX_VERSION=tls1.2 INFLUXDB_HTTP_UNIX_SOCKET_ENABLED=true \
        INFLUXDB_HTTP_BIND_SOCKET="$socket" INFLUXDB_HTTP_UNIX_SOCKET_PERMISSIONS=0600 \
        influxd > "$bootstrap/influxd.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do
        curl -fsS -o /dev/null --unix-socket "$socket" http://localhost/ping 2> /dev/null && break
        kill -0 "$pid" 2> /dev/null || { cat "$bootstrap/influxd.log" >&2; exit 1; }
        sleep 0.1
    done
    # InfluxQL string literal: a backslash and a single quote escaped
    password="${INFLUX_ADMIN_PASSWORD//\\/\\\\}"
    password="${password//\'/\\\'}"
    printf 'CREATE USER "%s" WITH PASSWORD '\''%s'\'' WITH ALL PRIVILEGES' "$ADMIN" "$password" \
        > "$bootstrap/statement"
    status="$(curl -sS -o "$bootstrap/answer" -w '%{http_code}' --unix-socket "$socket" \
        -XPOST http://localhost/query --data-urlencode "q@$bootstrap/statement")"
    kill "$pid"
    wait "$pid" || true
    # 401: the data directory had an admin already (made before this entry point existed)
    if [ "$status" != 401 ] && { [ "$status" != 200 ] || grep -q '"error"' "$bootstrap/answer"; }; then
        echo "influxdb: the bootstrap run could not create the admin: $status $(head -c 300 "$bootstrap/answer")" >&2
        rm -rf "$bootstrap"
        exit 1
    fi
    rm -rf "$bootstrap"
    : > "$MARKER"
    echo "influxdb: the admin $ADMIN exists; starting for real" >&2
fi
[ "${1:-}" != influxd ] || shift  # the image's own command, when the engine passes it on
exec influxd "$@"
