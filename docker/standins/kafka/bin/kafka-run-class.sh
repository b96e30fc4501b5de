#!/bin/bash
# kafka-run-class.sh of the stand-in: runs a Kafka main class on the jars in /opt/kafka/libs.
exec java ${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g} -XX:+UseG1GC -Djava.awt.headless=true \
    ${KAFKA_LOG4J_OPTS:--Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties} ${KAFKA_OPTS:-} \
    -cp '/opt/kafka/libs/*' "$@"
