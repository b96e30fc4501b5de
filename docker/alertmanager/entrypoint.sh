#!/bin/sh
# Entry point of the compose `alertmanager` service (prom/alertmanager image, busybox sh): the
# launcher's routing (stacktools/stack/servers/alertmanager.py, Alertmanager: every alert, firing
# and resolved, grouped by alert and service, each component's overload alert on its own, to
# ALERT_WEBHOOK_URL; without one the alerts show only in its API and page) written to a
# private file, then alertmanager in the foreground, one instance (no gossip port). The URL may carry a token: it is never on a command line.
set -eu
umask 077
CONFIG="${ALERTMANAGER_CONFIG:-/alertmanager/alertmanager.yml}"
STORAGE="${ALERTMANAGER_STORAGE:-/alertmanager}"
LISTEN="${ALERTMANAGER_LISTEN:-:9093}"
if [ -n "${ALERT_WEBHOOK_URL:-}" ]; then
    receiver='webhook'
    receivers=$(printf '  - name: webhook\n    webhook_configs:\n      - url: "%s"\n        send_resolved: true\n' "$ALERT_WEBHOOK_URL")
else
    receiver='none'
    receivers='  - name: none'
fi
# each overload alert of a component its own group (stacktools/stack/servers/alertmanager.py,
# OVERLOAD_GROUP): notified once firing, once resolved
overload='    - matchers: ['"'"'alertname="ComponentOverload"'"'"']\n      group_by: [alertname, thing, component, rating, overload_since]'
printf 'route:\n  receiver: %s\n  group_by: [alertname, service]\n  group_wait: 10s\n  group_interval: 30s\n  repeat_interval: 4h\n  routes:\n%b\nreceivers:\n%s\n' \
    "$receiver" "$overload" "$receivers" > "$CONFIG"
exec "${ALERTMANAGER_BIN:-/bin/alertmanager}" --config.file="$CONFIG" --storage.path="$STORAGE" \
    --web.listen-address="$LISTEN" --cluster.listen-address=
