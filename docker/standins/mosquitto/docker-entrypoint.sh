#!/bin/ash
# The official image's entry point: started as root, it hands /mosquitto to the mosquitto user
# (a volume mounted there may come owned by someone else), then runs the command.
set -e
if [ "$(id -u)" = 0 ] && [ -d /mosquitto ]; then
    chown -R mosquitto:mosquitto /mosquitto || true
fi
exec "$@"
