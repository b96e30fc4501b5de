"""One view of the running pipeline: each stage a node of the graph (simulator -> bridge ->
Kafka -> Spark -> Kafka -> connector -> InfluxDB) with its rate, backlog, last progress, open
transaction, dead letters and firing alerts, as Prometheus sees them; printed by
``python -m stacktools.stack status --pipeline`` (``--watch`` refreshes it)."""
