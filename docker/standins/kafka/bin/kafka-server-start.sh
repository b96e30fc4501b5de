#!/bin/bash
# As the official image's: the broker's heap is fixed at 1 GiB unless KAFKA_HEAP_OPTS says else.
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}"
exec "$(dirname "$0")/kafka-run-class.sh" kafka.Kafka "$@"
