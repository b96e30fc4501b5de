#!/bin/bash
# Entry point of compose's Kafka nodes (apache/kafka image): the configuration the one-shot
# `config` job rendered (python -m stacktools.stack render, from the local launcher's Kafka
# component) into /etc/kafka/machinedata/<node>/. Formats the storage on the first start with
# the admin's SCRAM credential (a KRaft cluster keeps its users in its metadata, so the first
# user must exist before the broker starts; `provision` adds the others), then runs the broker.
# The storage tool's arguments are a Java argument file: no command line holds the password.
set -euo pipefail
CONF="/etc/kafka/machinedata/${KAFKA_NODE:-kafka}"
# the start scripts' environment: the heap, the log to the console only, no GC log file
. "$CONF/kafka.env"
/opt/kafka/bin/kafka-run-class.sh "@$CONF/storage-format.args"
exec /opt/kafka/bin/kafka-server-start.sh "$CONF/server.properties"
