"""The naive baseline of benchmarks/bench_connector.py: a loader in the benchmark's own process
that does everything per record (poll, fastavro decode, an influxdb-client Point) and writes and
commits synchronously every 1,000 points, the straightforward way the connector is measured
against."""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from benchmarks.support.connector_probes import count_points
from stacktools.harness.wiring import private_database
from stacktools.stack.settings import Settings
from streamkit.kafka_clients import client_config
from streamkit.tls import client_context
from streamkit.wire import AvroCodec

if TYPE_CHECKING:
    from confluent_kafka import Consumer
    from influxdb_client import InfluxDBClient
    from influxdb_client.client.write_api import WriteApi


NS_PER_MS = 1_000_000


def measure_naive_baseline(
    settings: Settings, topic: str, records: int, databases: list[str]
) -> dict:
    """The straightforward loader: everything per record, write and commit per 1,000 points."""
    from influxdb_client.client.write_api import SYNCHRONOUS

    database = private_database(settings)
    databases.append(database)
    codec = AvroCodec("measurement")
    consumer = naive_consumer(settings)
    client = naive_influx_client(settings)
    write_api = client.write_api(write_options=SYNCHRONOUS)
    bucket = f"{database}/autogen"
    consumer.subscribe([topic])
    written, seconds, cpu = load_naively(consumer, codec, write_api, bucket, records)
    consumer.close()
    client.close()
    return {
        "loader": "naive baseline",
        "batch_points": 1000,
        "flush_ms": None,
        "records": records,
        "seconds": seconds,
        "points_per_s": written / seconds,
        "from_launch_s": seconds,
        "batches": written / 1000,
        "batch_ms": None,
        "cpu_s": cpu,
        "influx_cpu_s": None,
        "runqueue_s": None,
        "points_per_batch": 1000,
        "stored": count_points(settings, database),
        "database": database,
    }


def naive_consumer(settings: Settings) -> Consumer:
    """A read_committed consumer of its own group, from the start, committing by hand."""
    from confluent_kafka import Consumer

    return Consumer(
        {
            **client_config(settings, "bench-naive"),
            "group.id": f"bench-naive-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )


def naive_influx_client(settings: Settings) -> InfluxDBClient:
    """influxdb-client as its documentation shows it, against the stack's InfluxDB."""
    from influxdb_client import InfluxDBClient

    return InfluxDBClient(
        url=settings.influx_base_url,
        token=f"{settings.influx_username}:{settings.influx_password.reveal()}",
        org="-",
        verify_ssl=True,
        ssl_context=client_context(settings),  # the stack's CA only, with TLS on
        timeout=30_000,
    )


def load_naively(
    consumer: Consumer, codec: AvroCodec, write_api: WriteApi, bucket: str, records: int
) -> tuple[int, float, float]:
    """Polls, decodes and builds a Point per record, writing and committing every 1,000: the
    points written, and the wall and CPU seconds from the first record on."""
    from influxdb_client import Point, WritePrecision

    points: list[Point] = []
    written = 0
    started = None
    last_print = time.perf_counter()
    cpu_before = None
    while written < records:
        message = consumer.poll(1.0)
        if message is None or message.error() is not None:
            continue
        if started is None:
            started, cpu_before = time.perf_counter(), time.process_time()
        value = message.value()
        assert value is not None  # a record, not an error event
        r = codec.decode(value)
        points.append(
            Point("raw")
            .tag("thing", r["thing"])
            .tag("quantity", r["quantity"])
            .field("value", r["value"])
            .time(r["event_time_ms"] * NS_PER_MS, WritePrecision.NS)
        )
        if len(points) == 1000 or written + len(points) == records:
            write_api.write(
                bucket=bucket,
                record=points,
                # influxdb-client declares the constant WritePrecision.NS as a str
                write_precision=WritePrecision.NS,  # type: ignore[arg-type]
            )
            consumer.commit(asynchronous=False)
            written += len(points)
            points = []
            now = time.perf_counter()
            if now - last_print > 5:
                print(
                    f"  ... {written:,}/{records:,} points written after {now - started:.0f} s"
                    f" ({written / (now - started):,.0f} points/s)",
                    flush=True,
                )
                last_print = now
    assert started is not None and cpu_before is not None  # records > 0: the loop ran
    return written, time.perf_counter() - started, time.process_time() - cpu_before
