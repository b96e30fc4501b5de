#!/bin/sh
# The official image's launcher in short: the runner jar with JAVA_OPTIONS and JAVA_OPTS_APPEND
# (word-split on purpose: each holds several JVM options).
# shellcheck disable=SC2086
exec java $JAVA_OPTIONS $JAVA_OPTS_APPEND -jar /deployments/apicurio-registry-app-*-runner.jar "$@"
