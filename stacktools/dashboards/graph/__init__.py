"""The pipeline graph, beside the dashboards the other view of the running pipeline: each stage a
node (simulator -> bridge -> Kafka -> Spark -> Kafka -> connector -> InfluxDB) with its rate,
backlog, last progress, open transaction, dead letters and firing alerts, as Prometheus sees
them; printed by ``python -m stacktools.stack status --pipeline`` (``--watch`` refreshes it)
and drawn as the pipeline-health dashboard's node graph panel (:mod:`.panel`)."""
