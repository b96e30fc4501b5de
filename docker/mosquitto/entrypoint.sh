#!/bin/sh
# Entry point of the compose `mosquitto` service (eclipse-mosquitto image, busybox sh):
# write the password file from MQTT_USERNAME / MQTT_PASSWORD, then run mosquitto in the
# foreground with docker/mosquitto/mosquitto.conf, which refuses anonymous clients.
set -eu

: "${MQTT_USERNAME:?MQTT_USERNAME must be set (see .env.example)}"
: "${MQTT_PASSWORD:?MQTT_PASSWORD must be set (see .env.example)}"

PASSWD_FILE="${MOSQUITTO_PASSWD_FILE:-/mosquitto/auth/passwd}"
CONF_FILE="${MOSQUITTO_CONF_FILE:-/docker/mosquitto/mosquitto.conf}"

mkdir -p "$(dirname "$PASSWD_FILE")"
rm -f "$PASSWD_FILE"
(umask 077 && : > "$PASSWD_FILE")
# -b takes the password from the command line; the file holds only its salted hash.
mosquitto_passwd -b "$PASSWD_FILE" "$MQTT_USERNAME" "$MQTT_PASSWORD"

# Started as root, mosquitto drops to the `mosquitto` user before it reads the password file.
if [ "$(id -u)" = "0" ] && id mosquitto > /dev/null 2>&1; then
    chown mosquitto:mosquitto "$PASSWD_FILE"
fi
chmod 0600 "$PASSWD_FILE"

exec mosquitto -c "$CONF_FILE"
