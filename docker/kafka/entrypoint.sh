#!/bin/bash
# Entry point of the compose `kafka` service (apache/kafka image): complete
# docker/kafka/server.properties with the host port and the passwords, format the storage once
# with the admin's SCRAM credentials (a KRaft cluster keeps its users in its metadata, so the
# first user must exist before the broker starts; the launcher's `provision` job adds the
# others), then run the broker in the foreground.
# Passwords must not contain a double quote or a backslash (JAAS quoting).
set -euo pipefail
umask 077  # the configuration files hold passwords

: "${KAFKA_ADMIN_PASSWORD:?KAFKA_ADMIN_PASSWORD must be set (see .env.example)}"
: "${KAFKA_CONTROLLER_PASSWORD:?KAFKA_CONTROLLER_PASSWORD must be set (see .env.example)}"
: "${CLUSTER_ID:?CLUSTER_ID must be set}"
# Refuse what stacktools/compose/credentials.py refuses: the .env.example placeholder and short
# passwords.
for name in KAFKA_ADMIN_PASSWORD KAFKA_CONTROLLER_PASSWORD; do
    eval "value=\${$name}"
    case "$value" in change-me) echo "$name is still the placeholder change-me: run python3 -m stacktools.compose.env" >&2; exit 1;; esac
    [ "${#value}" -ge 12 ] || { echo "$name is shorter than 12 characters" >&2; exit 1; }
    case "$value" in *'"'*|*\\*) echo "$name holds a double quote or a backslash" >&2; exit 1;; esac
done

CONF=/tmp/kafka/server.properties
CLIENT=/tmp/kafka/admin-client.properties
SCRAM='org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="%s";\n'
mkdir -p /tmp/kafka
{
    cat /docker/kafka/server.properties
    printf 'advertised.listeners=INTERNAL://kafka:19092,HOST://127.0.0.1:%s\n' "${KAFKA_PORT:-9092}"
    printf 'num.partitions=%s\n' "${TOPIC_PARTITIONS:-4}"
    # every SCRAM listener needs a login entry; the inter-broker one (INTERNAL) also logs in with it
    printf "listener.name.internal.scram-sha-512.sasl.jaas.config=$SCRAM" "$KAFKA_ADMIN_PASSWORD"
    printf "listener.name.host.scram-sha-512.sasl.jaas.config=$SCRAM" "$KAFKA_ADMIN_PASSWORD"
    printf 'listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" password="%s" user_controller="%s";\n' \
        "$KAFKA_CONTROLLER_PASSWORD" "$KAFKA_CONTROLLER_PASSWORD"
} > "$CONF"
# The healthcheck's client settings: the admin over SCRAM, over TLS trusting the stack's CA.
{
    printf 'security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n'
    printf 'ssl.truststore.type=PEM\nssl.truststore.location=/tls/ca.pem\n'
    printf "sasl.jaas.config=$SCRAM" "$KAFKA_ADMIN_PASSWORD"
} > "$CLIENT"

# The storage tool takes the admin's SCRAM credential as an argument: it goes into a Java argument
# file (`java @file`; printf is a shell builtin, so no process shows it), which is deleted right
# after, so the tool's command line holds only the file's name. --cluster-id=ID in one word: an
# id that begins with "-" would otherwise be read as an option.
ARGS=/tmp/kafka/storage-format.args
printf '"%s"\n' kafka.tools.StorageTool format --ignore-formatted --cluster-id="$CLUSTER_ID" \
    -c "$CONF" --add-scram "SCRAM-SHA-512=[name=admin,password=$KAFKA_ADMIN_PASSWORD]" > "$ARGS"
status=0
/opt/kafka/bin/kafka-run-class.sh "@$ARGS" || status=$?
rm -f "$ARGS"
[ "$status" -eq 0 ] || exit "$status"
exec /opt/kafka/bin/kafka-server-start.sh "$CONF"
