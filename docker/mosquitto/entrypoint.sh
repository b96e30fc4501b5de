#!/bin/sh
# Entry point of the compose `mosquitto` service (eclipse-mosquitto image, busybox sh): write
# the password file (admin, machine, bridge) from MQTT_<USER>_PASSWORD and the ACL file (the
# same rights as the local stack, stacktools/access.py: machines only publish under the prefix,
# the bridge only reads it), then run mosquitto in the foreground with
# docker/mosquitto/mosquitto.conf, which refuses anonymous clients.
set -eu

: "${MQTT_ADMIN_PASSWORD:?MQTT_ADMIN_PASSWORD must be set (see .env.example)}"
: "${MQTT_MACHINE_PASSWORD:?MQTT_MACHINE_PASSWORD must be set (see .env.example)}"
: "${MQTT_BRIDGE_PASSWORD:?MQTT_BRIDGE_PASSWORD must be set (see .env.example)}"
# Refuse what stacktools/credentials.py refuses: the .env.example placeholder and short passwords.
for name in MQTT_ADMIN_PASSWORD MQTT_MACHINE_PASSWORD MQTT_BRIDGE_PASSWORD; do
    eval "value=\${$name}"
    case "$value" in change-me) echo "$name is still the placeholder change-me: run python3 -m stacktools.compose_env" >&2; exit 1;; esac
    [ "${#value}" -ge 12 ] || { echo "$name is shorter than 12 characters" >&2; exit 1; }
done
PREFIX="${MQTT_TOPIC_PREFIX:-machines}"

PASSWD_FILE="${MOSQUITTO_PASSWD_FILE:-/mosquitto/auth/passwd}"
ACL_FILE="${MOSQUITTO_ACL_FILE:-/mosquitto/auth/acl}"
CONF_FILE="${MOSQUITTO_CONF_FILE:-/docker/mosquitto/mosquitto.conf}"

mkdir -p "$(dirname "$PASSWD_FILE")" "$(dirname "$ACL_FILE")"
rm -f "$PASSWD_FILE"
(umask 077 && : > "$PASSWD_FILE")
# -b takes the password from the command line; the file holds only its salted hash.
mosquitto_passwd -b "$PASSWD_FILE" admin "$MQTT_ADMIN_PASSWORD"
mosquitto_passwd -b "$PASSWD_FILE" machine "$MQTT_MACHINE_PASSWORD"
mosquitto_passwd -b "$PASSWD_FILE" bridge "$MQTT_BRIDGE_PASSWORD"
printf 'user admin\ntopic readwrite #\n\nuser machine\ntopic write %s/#\n\nuser bridge\ntopic read %s/#\n' \
    "$PREFIX" "$PREFIX" > "$ACL_FILE"

# Started as root, mosquitto drops to the `mosquitto` user before it reads these files.
if [ "$(id -u)" = "0" ] && id mosquitto > /dev/null 2>&1; then
    chown mosquitto:mosquitto "$PASSWD_FILE" "$ACL_FILE"
fi
chmod 0600 "$PASSWD_FILE" "$ACL_FILE"

exec mosquitto -c "$CONF_FILE"
