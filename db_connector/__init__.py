"""Kafka -> InfluxDB: every committed record of the pipeline as one idempotent InfluxDB point."""
