#!/bin/bash
# kafka-run-class.sh of the stand-in: runs a Kafka main class on the jars in /opt/kafka/libs, with
# the official script's defaults (a 256 MiB heap for the tools, G1).
exec java ${KAFKA_HEAP_OPTS:--Xmx256M} -XX:+UseG1GC -Djava.awt.headless=true \
    ${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties} ${KAFKA_OPTS:-} \
    -cp '/opt/kafka/libs/*' "$@"
