"""``python -m stacktools.verify``: is the run's output exactly what an events file implies?

The expectation (raw points, joined pairs, closed windows, late records) is recomputed from the
file by an implementation of the specification of its own (docs/join.md, docs/windows.md,
docs/influxdb-schema.md), sharing no code with the pipeline's operators, and compared value by
value with the run's database, or its Kafka output topics (docs/verify.md).
"""
