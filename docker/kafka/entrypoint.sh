#!/bin/bash
# Entry point of compose's Kafka nodes (apache/kafka image; KAFKA_NODE names the node, `kafka`
# by default): the configuration the one-shot `config` job rendered (python -m stacktools.stack
# render, from the local launcher's Kafka component) into /etc/kafka/machinedata/<node>/. Formats the storage on the first start with
# the admin's SCRAM credential (a KRaft cluster keeps its users in its metadata, so the first
# user must exist before the broker starts; `provision` adds the others), then runs the broker.
# The storage tool's arguments are a Java argument file: no command line holds the password.
set -euo pipefail
NODE="${KAFKA_NODE:-kafka}"
CONF="/etc/kafka/machinedata/$NODE"
if [ ! -f "$CONF/kafka.env" ]; then
    echo "kafka: the config job wrote nothing for $NODE: the cluster profile needs KAFKA_BROKERS=3 in .env" >&2
    exit 1
fi
# the start scripts' environment: the heap, the log to the console only, no GC log file
. "$CONF/kafka.env"
/opt/kafka/bin/kafka-run-class.sh "@$CONF/storage-format.args"
exec /opt/kafka/bin/kafka-server-start.sh "$CONF/server.properties"
