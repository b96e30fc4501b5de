"""Shared helpers for every service of the machine-data stack.

One config model (env + CLI), Kafka/MQTT client setup, the Avro codec, Prometheus metrics,
structured logging, graceful shutdown, topic provisioning and the local stack launcher live
here so that no service copies another's setup code.
"""
