"""The core every service stands on: one configuration model, structured logs, metrics and
health, graceful shutdown, service start-up, the Kafka and MQTT clients, deadlines and back-off,
the Avro codec and the row format. Nothing here imports a service or a tool."""
