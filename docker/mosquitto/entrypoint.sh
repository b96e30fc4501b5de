#!/bin/sh
# Entry point of the compose `mosquitto` service (eclipse-mosquitto image, busybox sh): write
# the password file (admin, machine, bridge) from MQTT_<USER>_PASSWORD, the ACL file (the same
# rights as the local stack, stacktools/stack/access.py: machines only publish under the prefix, the
# bridge only reads it), the healthcheck's credentials, and take the server certificate and key
# from the `certs` job's volume; then run mosquitto in the foreground with
# docker/mosquitto/mosquitto.conf: one TLS listener, anonymous clients refused, bounded queues.
# No password is ever an argument of a command (printf is a shell builtin): ps shows none.
set -eu
umask 077  # every file written here is private

: "${MQTT_ADMIN_PASSWORD:?MQTT_ADMIN_PASSWORD must be set (see .env.example)}"
: "${MQTT_MACHINE_PASSWORD:?MQTT_MACHINE_PASSWORD must be set (see .env.example)}"
: "${MQTT_BRIDGE_PASSWORD:?MQTT_BRIDGE_PASSWORD must be set (see .env.example)}"
# Refuse what stacktools/compose/credentials.py refuses: the .env.example placeholder and short
# passwords.
for name in MQTT_ADMIN_PASSWORD MQTT_MACHINE_PASSWORD MQTT_BRIDGE_PASSWORD; do
    eval "value=\${$name}"
    case "$value" in change-me) echo "$name is still the placeholder change-me: run python3 -m stacktools.compose.env" >&2; exit 1;; esac
    [ "${#value}" -ge 12 ] || { echo "$name is shorter than 12 characters" >&2; exit 1; }
done
PREFIX="${MQTT_TOPIC_PREFIX:-machines}"

PASSWD_FILE="${MOSQUITTO_PASSWD_FILE:-/mosquitto/auth/passwd}"
ACL_FILE="${MOSQUITTO_ACL_FILE:-/mosquitto/auth/acl}"
CONF_FILE="${MOSQUITTO_CONF_FILE:-/docker/mosquitto/mosquitto.conf}"
TLS_DIR="${MOSQUITTO_TLS_DIR:-/tls}"
AUTH_DIR="$(dirname "$PASSWD_FILE")"
# mosquitto_pub reads its default options from $XDG_CONFIG_HOME/mosquitto_pub: the healthcheck
# logs in as the admin with no password on its command line.
HEALTHCHECK_DIR="$AUTH_DIR/healthcheck"

mkdir -p "$AUTH_DIR" "$(dirname "$ACL_FILE")" "$HEALTHCHECK_DIR"
rm -f "$PASSWD_FILE"
# user:password lines, then hashed in place (-U): the file ends holding only salted hashes.
printf 'admin:%s\nmachine:%s\nbridge:%s\n' \
    "$MQTT_ADMIN_PASSWORD" "$MQTT_MACHINE_PASSWORD" "$MQTT_BRIDGE_PASSWORD" > "$PASSWD_FILE"
mosquitto_passwd -U "$PASSWD_FILE"
printf 'user admin\ntopic readwrite #\n\nuser machine\ntopic write %s/#\n\nuser bridge\ntopic read %s/#\n' \
    "$PREFIX" "$PREFIX" > "$ACL_FILE"
printf -- '-u admin\n-P %s\n' "$MQTT_ADMIN_PASSWORD" > "$HEALTHCHECK_DIR/mosquitto_pub"
# The volume's server key belongs to root: mosquitto reads its own copy.
for file in ca.pem server.pem server-key.pem; do
    cp "$TLS_DIR/$file" "$AUTH_DIR/$file"
done

# Started as root, mosquitto drops to the `mosquitto` user before it reads these files.
if [ "$(id -u)" = "0" ] && id mosquitto > /dev/null 2>&1; then
    # the directory too (0700 by the umask); the healthcheck's login inside stays root's
    chown mosquitto:mosquitto "$AUTH_DIR" "$PASSWD_FILE" "$ACL_FILE" "$AUTH_DIR/ca.pem" \
        "$AUTH_DIR/server.pem" "$AUTH_DIR/server-key.pem"
fi
chmod 0600 "$PASSWD_FILE" "$ACL_FILE" "$AUTH_DIR/server-key.pem"

exec mosquitto -c "$CONF_FILE"
