#!/bin/bash
# kafka-run-class.sh of the stand-in: runs a class on the jars of /opt/kafka/libs as Kafka 4's
# does by default: the tools' 256 MiB heap, G1 with its pause settings, JMX on (on a port only
# with JMX_PORT), and the tools' log4j2 configuration (warnings to stderr) unless KAFKA_LOG4J_OPTS
# names one, in which case LOG_DIR (/opt/kafka/logs) is created. Its own options come first:
# -name NAME, -loggc (a GC log, LOG_DIR/NAME-gc.log, ten files of 100 MB) and -daemon (in the
# background, the output to LOG_DIR/NAME.out).
if [ $# -lt 1 ]; then
  echo "USAGE: $0 [-daemon] [-name servicename] [-loggc] classname [opts]"
  exit 1
fi
base_dir=$(dirname "$0")/..
for jar in "$base_dir"/libs/*; do
  CLASSPATH="$CLASSPATH:$jar"
done
CLASSPATH=${CLASSPATH#:}

LOG_DIR=${LOG_DIR:-$base_dir/logs}
if [ -z "$KAFKA_LOG4J_OPTS" ]; then
  KAFKA_LOG4J_OPTS="-Dlog4j2.configurationFile=$base_dir/config/tools-log4j2.yaml"
else
  mkdir -p "$LOG_DIR"
fi
KAFKA_LOG4J_OPTS="-Dkafka.logs.dir=$LOG_DIR $KAFKA_LOG4J_OPTS"

if [ -z "$KAFKA_JMX_OPTS" ]; then
  KAFKA_JMX_OPTS="-Dcom.sun.management.jmxremote=true -Dcom.sun.management.jmxremote.authenticate=false -Dcom.sun.management.jmxremote.ssl=false"
fi
if [ -n "$JMX_PORT" ]; then
  KAFKA_JMX_OPTS="$KAFKA_JMX_OPTS -Dcom.sun.management.jmxremote.port=$JMX_PORT"
  case "$KAFKA_JMX_OPTS" in
    *-Dcom.sun.management.jmxremote.rmi.port=*) ;;
    *) KAFKA_JMX_OPTS="$KAFKA_JMX_OPTS -Dcom.sun.management.jmxremote.rmi.port=$JMX_PORT" ;;
  esac
fi
JAVA=java
[ -z "$JAVA_HOME" ] || JAVA=$JAVA_HOME/bin/java
KAFKA_HEAP_OPTS=${KAFKA_HEAP_OPTS:--Xmx256M}
if [ -z "$KAFKA_JVM_PERFORMANCE_OPTS" ]; then
  KAFKA_JVM_PERFORMANCE_OPTS="-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true"
fi

while [ $# -gt 0 ]; do
  case $1 in
    -name) DAEMON_NAME=$2; CONSOLE_OUTPUT_FILE=$LOG_DIR/$DAEMON_NAME.out; shift 2 ;;
    -loggc) [ -n "$KAFKA_GC_LOG_OPTS" ] || GC_LOG_ENABLED=true; shift ;;
    -daemon) DAEMON_MODE=true; shift ;;
    *) break ;;
  esac
done
if [ "$GC_LOG_ENABLED" = true ]; then
  KAFKA_GC_LOG_OPTS="-Xlog:gc*:file=$LOG_DIR/$DAEMON_NAME-gc.log:time,tags:filecount=10,filesize=100M"
fi

# each *_OPTS holds several JVM options: split on purpose
# shellcheck disable=SC2086
if [ "$DAEMON_MODE" = true ]; then
  nohup "$JAVA" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_GC_LOG_OPTS $KAFKA_JMX_OPTS \
    $KAFKA_LOG4J_OPTS -cp "$CLASSPATH" $KAFKA_OPTS "$@" > "$CONSOLE_OUTPUT_FILE" 2>&1 < /dev/null &
else
  exec "$JAVA" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_GC_LOG_OPTS $KAFKA_JMX_OPTS \
    $KAFKA_LOG4J_OPTS -cp "$CLASSPATH" $KAFKA_OPTS "$@"
fi
