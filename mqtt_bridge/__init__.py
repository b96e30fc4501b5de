"""MQTT -> Kafka bridge: one compacted, Avro-encoded Kafka record per quantity of each row,
acknowledged to MQTT only once Kafka has every record of the message (no loss on crash)."""
