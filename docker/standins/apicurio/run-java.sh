#!/bin/sh
# The official image's launcher (ubi9/openjdk-17-runtime's run-java.sh) as far as compose meets
# it: the image's default JVM options first (heap as a share of the container's memory, a
# collector: GC_CONTAINER_OPTIONS or else the parallel one, the heap's free ratios, exit on an
# OutOfMemoryError), then JAVA_OPTS_APPEND; JAVA_OPTIONS is not read. So a collector given in
# JAVA_OPTS_APPEND stops the JVM here as it does there ("Multiple garbage collectors selected").
set -eu
defaults=""
if [ "${JAVA_MAX_MEM_RATIO:-50}" != 0 ]; then
  defaults="-XX:MaxRAMPercentage=${JAVA_MAX_MEM_RATIO:-50}.0"
fi
defaults="$defaults ${GC_CONTAINER_OPTIONS:--XX:+UseParallelGC}"
defaults="$defaults -XX:MinHeapFreeRatio=${GC_MIN_HEAP_FREE_RATIO:-10}"
defaults="$defaults -XX:MaxHeapFreeRatio=${GC_MAX_HEAP_FREE_RATIO:-20}"
defaults="$defaults -XX:GCTimeRatio=${GC_TIME_RATIO:-4}"
defaults="$defaults -XX:AdaptiveSizePolicyWeight=${GC_ADAPTIVE_SIZE_POLICY_WEIGHT:-90}"
defaults="$defaults -XX:+ExitOnOutOfMemoryError"
# word-split on purpose: each holds several JVM options
# shellcheck disable=SC2086
exec java $defaults ${JAVA_OPTS_APPEND:-} -jar /deployments/apicurio-registry-app-*-runner.jar "$@"
