#!/bin/bash
# kafka-server-start.sh of the stand-in, with Kafka 4's defaults: the broker's log4j2
# configuration (config/log4j2.yaml: stdout and files under LOG_DIR), the heap fixed at 1 GiB
# unless KAFKA_HEAP_OPTS says else, and a GC log (`-name kafkaServer -loggc`, unless EXTRA_ARGS is
# set); `-daemon` first runs the broker in the background.
if [ $# -lt 1 ]; then
  echo "USAGE: $0 [-daemon] server.properties [--override property=value]*"
  exit 1
fi
bin=$(dirname "$0")
export KAFKA_LOG4J_OPTS="${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=$bin/../config/log4j2.yaml}"
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}"
EXTRA_ARGS=${EXTRA_ARGS-'-name kafkaServer -loggc'}
if [ "$1" = "-daemon" ]; then
  EXTRA_ARGS="-daemon $EXTRA_ARGS"
  shift
fi
# EXTRA_ARGS is a list of options: split on purpose
# shellcheck disable=SC2086
exec "$bin/kafka-run-class.sh" $EXTRA_ARGS kafka.Kafka "$@"
