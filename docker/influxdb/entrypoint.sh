#!/bin/bash
# Entry point of the compose `influxdb` service (influxdb:1.8.10 image, which runs influxd as
# root), with the configuration the one-shot `config` job rendered (python -m stacktools.stack
# render, from the local launcher's InfluxDB component) into /etc/influxdb/machinedata: HTTPS
# with the `certs` job's certificate, auth on, and the first admin created where no stranger can
# get in first (the launcher's way, stacktools/stack/influx_bootstrap.py).
#
# InfluxDB 1.x lets anyone create a user WITH ALL PRIVILEGES while it has none. So, on a data
# directory without its admin, a bootstrap run comes first (influxdb-bootstrap.conf): its HTTP
# service also listens on a Unix socket in a 0700 directory, its TCP listeners are on ephemeral
# loopback ports and speak only TLS with no protocol version allowed (minimum above maximum:
# every handshake fails); the admin is created through the socket, with the rendered statement
# read from its 0600 file (no password on any command line). Then influxd runs for real.
#
# A full disk leaves influxd 1.8 running but unable to write until it restarts (its WAL writer
# keeps the error), and no restart policy restarts a process that runs. So this script stays
# influxd's parent and watches the data directory, as the local stack's disk reporter does
# (stacktools/stack/resume.py, which renders the thresholds into disk-watch.env): once the disk
# has been seen full and has room again, influxd is stopped and started. SIGTERM is passed on.
set -euo pipefail
umask 077
CONF="${INFLUX_CONF_DIR:-/etc/influxdb/machinedata}"
DATA_DIR="${INFLUX_DATA_DIR:-/var/lib/influxdb}"
MARKER="$DATA_DIR/admin-created"

if [ ! -e "$MARKER" ]; then
    # the socket's directory, as influxdb-bootstrap.conf names it
    socket="$(sed -n 's/^ *bind-socket = "\(.*\)"$/\1/p' "$CONF/influxdb-bootstrap.conf")"
    bootstrap="$(dirname "$socket")"
    rm -rf "$bootstrap" && mkdir -p -m 0700 "$bootstrap"
    influxd run -config "$CONF/influxdb-bootstrap.conf" > "$bootstrap/influxd.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do
        curl -fsS -o /dev/null --unix-socket "$socket" http://localhost/ping 2> /dev/null && break
        kill -0 "$pid" 2> /dev/null || { cat "$bootstrap/influxd.log" >&2; exit 1; }
        sleep 0.1
    done
    status="$(curl -sS -o "$bootstrap/answer" -w '%{http_code}' --unix-socket "$socket" \
        -XPOST http://localhost/query --data-urlencode "q@$CONF/admin.influxql")"
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
    echo "influxdb: the admin exists; starting for real" >&2
fi

# FULL_BYTES, ROOM_PERCENT, WATCH_S
. "$CONF/disk-watch.env"
pid=""
start_influxd() {
    influxd run -config "$CONF/influxdb.conf" &
    pid=$!
}
stop_influxd() {
    kill -TERM "$pid" 2> /dev/null || true
    status=0
    wait "$pid" || status=$?
}
trap 'stop_influxd; exit "$status"' TERM INT
start_influxd
full=0
while kill -0 "$pid" 2> /dev/null; do
    sleep "$WATCH_S" &
    wait $! || true
    read -r total free < <(df -P -B1 "$DATA_DIR" | awk 'NR == 2 {print $2, $4}') || continue
    if [ "$free" -lt "$FULL_BYTES" ]; then
        [ "$full" = 1 ] || echo "influxdb: its disk is full ($free bytes free)" >&2
        full=1
    elif [ "$full" = 1 ] && [ $((free * 100)) -ge $((total * ROOM_PERCENT)) ]; then
        echo "influxdb: its disk has room again; restarting influxd, which a full disk leaves unable to write" >&2
        stop_influxd
        full=0
        start_influxd
    fi
done
status=0
wait "$pid" || status=$?
echo "influxdb: influxd exited ($status)" >&2
exit "$status"
