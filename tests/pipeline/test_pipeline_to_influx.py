"""The whole pipeline into InfluxDB, then the dashboards on what it wrote.

simulator -> Mosquitto -> bridge -> Kafka -> Spark join + aggregates -> Kafka -> connector ->
InfluxDB, every service a real process on the local stack, scraped by the real Prometheus.
Afterwards InfluxDB must hold exactly what Kafka committed (per measurement, point by point),
and every panel and variable query of every dashboard must return data.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from db_connector.lineprotocol import NS_PER_MS
from db_connector.points import window_tag
from simulator.publisher import MqttPublisher
from streamkit.avro_codec import AvroCodec
from streamkit.config import Settings
from streamkit.dashboards import check_dashboards
from streamkit.harness import (REPO, Service, bridge, connector, drop_database, expected_records, free_port,
                               influx_rows, new_lane, private_database, private_topic, read_topic, simulator,
                               wait_for_keys, wait_for_log)

pytestmark = pytest.mark.stack
SAMPLE = REPO / "tests" / "data" / "test_events.json"
ROW_SPACING_MS = 100
BAD_PAYLOADS = [b"not json", b'{"Thing": "T", "Timestamp": 1}', b'{"Thing": "T", "Timestamp": 1554000000000, "x": "hi"}']


def recent_events(path: Path, end_ms: int) -> Path:
    """The sample in its own (unsorted) file order, re-timed into the minutes before `end_ms`:
    rows keep their event-time order but are ROW_SPACING_MS apart, so the data, the late
    records and the services' metrics all fall into one dashboard time range."""
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    ranked = sorted(range(len(rows)), key=lambda i: (rows[i]["Timestamp"], rows[i]["Thing"]))
    first = end_ms - len(rows) * ROW_SPACING_MS
    for rank, index in enumerate(ranked):
        rows[index]["Timestamp"] = first + rank * ROW_SPACING_MS
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def scraped(settings: Settings, name: str, service: Service, label: str) -> Service:
    """Register the service's /metrics with the local Prometheus (file target), as its default port would be."""
    port = service.args[service.args.index("--metrics-port") + 1]
    target = settings.run_dir / "prometheus" / "targets" / f"{name}.json"
    target.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": {"service": label}}]))
    return service


def committed_identities(settings: Settings, topics: dict[str, str]) -> dict[str, set]:
    """Per measurement, the identity of every point the committed Kafka records make."""
    decode = {kind: AvroCodec(schema).decode for kind, schema in
              (("joined", "joined"), ("aggregates", "aggregate"), ("late", "late"))}
    out: dict[str, set] = {"raw": set(), "joined": set(), "aggregate": set(), "late": set()}
    for message in read_topic(settings, topics["raw"]):
        thing, quantity, time_ms = message.key().decode().rsplit("|", 2)
        out["raw"].add((thing, quantity, int(time_ms) * NS_PER_MS))
    for message in read_topic(settings, topics["joined"]):
        r = decode["joined"](message.value())
        out["joined"].add((r["thing"], f"{r['left_quantity']}:{r['right_quantity']}", r["left_time_ms"],
                           r["right_time_ms"]))
    for message in read_topic(settings, topics["aggregates"]):
        r = decode["aggregates"](message.value())
        window = window_tag(r["window_kind"], r["window_size_ms"], r["window_slide_ms"])
        out["aggregate"].add((r["thing"], r["quantity"], window, r["window_start_ms"] * NS_PER_MS))
    for message in read_topic(settings, topics["late"]):
        r = decode["late"](message.value())
        out["late"].add((r["thing"], r["quantity"], r["stage"], r["reason"], r["event_time_ms"] * NS_PER_MS))
    return out


def influx_identities(settings: Settings, database: str) -> dict[str, set]:
    def rows(measurement: str) -> list[dict]:
        return influx_rows(settings, database, f'SELECT * FROM "{measurement}"')

    return {
        "raw": {(r["thing"], r["quantity"], r["time"]) for r in rows("raw")},
        "joined": {(r["thing"], r["pair"], r["left_time_ms"], r["right_time_ms"]) for r in rows("joined")},
        "aggregate": {(r["thing"], r["quantity"], r["window"], r["time"]) for r in rows("aggregate")},
        "late": {(r["thing"], r["quantity"], r["stage"], r["reason"], r["time"]) for r in rows("late")},
    }


def wait_for_input_rows(log: Path, rows: int, job: Service, timeout_s: float, *, then_idle: bool = False) -> None:
    """Until a streaming job's progress lines account for `rows` input records: it has read
    the whole raw topic (and keeps running, so Prometheus sees its final counters). With
    `then_idle`, also until a batch without input ran after that: the no-data batch in which a
    windowed job's advanced watermark closes its windows."""
    deadline = time.monotonic() + timeout_s
    seen, idle = 0, False
    while time.monotonic() < deadline:
        seen, idle = 0, False
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{") and '"batch progress"' in line:
                input_rows = json.loads(line).get("input_rows", 0)
                idle = seen >= rows and input_rows == 0
                seen += input_rows
        if seen >= rows and (idle or not then_idle):
            return
        assert job.alive(), log.read_text(errors="replace")[-3000:]
        time.sleep(2)
    raise AssertionError(f"{log.name}: {seen} of {rows} input rows (idle batch: {idle}) after {timeout_s}s")


def point_count(settings: Settings, database: str, measurement: str) -> int:
    rows = influx_rows(settings, database, f'SELECT count(*) FROM "{measurement}"')
    return max((v for r in rows for k, v in r.items() if k.startswith("count_")), default=0)


def test_pipeline_lands_exactly_in_influxdb_and_every_panel_has_data(stack_settings: Settings, tmp_path: Path) -> None:
    settings = stack_settings
    started_ms = int(time.time() * 1000)
    events = recent_events(tmp_path / "events.json", started_ms)
    lane = new_lane(settings)
    topics = {"raw": lane.raw_topic, "dlq": lane.dlq_topic, "joined": private_topic(settings, "joined", 2),
              "aggregates": private_topic(settings, "aggregates", 2), "late": private_topic(settings, "late", 2)}
    markers = private_topic(settings, "markers", 1, compact=True)
    database = private_database(settings)
    tag = lane.prefix
    targets: list[str] = []
    services: list[Service] = []

    def run(name: str, service: Service, label: str) -> Service:
        targets.append(f"{tag}-{name}")
        services.append(scraped(settings, f"{tag}-{name}", service, label).start())
        return services[-1]

    spark_args = ["--raw-topic", topics["raw"], "--late-topic", topics["late"], "--marker-topic", markers,
                  "--shuffle-partitions", "2", "--metrics-port"]
    try:
        the_bridge = run("bridge", bridge(lane, tmp_path / "bridge.log"), "mqtt_bridge")
        wait_for_log(tmp_path / "bridge.log", '"bridge running"', 60, the_bridge)
        join = run("join", Service("spark_jobs.join", [
            *spark_args, str(free_port()), "--joined-topic", topics["joined"], "--query-name", f"join-{tag}",
            "--checkpoint-dir", str(tmp_path / "join-checkpoint")], tmp_path / "join.log"), "spark_join")
        aggregate = run("aggregate", Service("spark_jobs.aggregate", [
            *spark_args, str(free_port()), "--aggregates-topic", topics["aggregates"], "--query-name", f"agg-{tag}",
            "--checkpoint-dir", str(tmp_path / "agg-checkpoint")], tmp_path / "aggregate.log"), "spark_aggregate")
        loader = run("connector", connector(settings, tmp_path / "connector.log", database, f"g-{database}", topics,
                                            "--flush-interval-ms", "500"), "db_connector")
        sim = run("simulator", simulator(lane, events, tmp_path / "simulator.log", "--order", "file", "--rate", "400"),
                  "simulator")
        assert sim.process.wait(300) == 0, (tmp_path / "simulator.log").read_text()[-2000:]
        publisher = MqttPublisher(settings, max_inflight=10, client_prefix=f"bad-{tag}")
        for payload in BAD_PAYLOADS:
            publisher.publish_raw(f"{lane.prefix}/bad", payload)
        assert publisher.wait_all_acked(len(BAD_PAYLOADS))
        publisher.close()
        expected_raw = expected_records(events)
        assert set(expected_raw) <= wait_for_keys(settings, topics["raw"], set(expected_raw), 120)
        raw_count = len(read_topic(settings, topics["raw"]))
        wait_for_input_rows(tmp_path / "join.log", raw_count, join, 600)
        wait_for_input_rows(tmp_path / "aggregate.log", raw_count, aggregate, 600, then_idle=True)

        expected = committed_identities(settings, topics)
        assert {k: len(v) > 0 for k, v in expected.items()} == dict.fromkeys(expected, True), \
            {k: len(v) for k, v in expected.items()}
        assert expected["raw"] == {(k.decode().rsplit("|", 2)[0], k.decode().rsplit("|", 2)[1],
                                    int(k.decode().rsplit("|", 2)[2]) * NS_PER_MS) for k in expected_raw}
        dead_letters = len(read_topic(settings, topics["dlq"]))
        assert dead_letters == len(BAD_PAYLOADS)
        deadline = time.monotonic() + 120
        got: dict[str, set] = {}
        while time.monotonic() < deadline:
            got = influx_identities(settings, database)
            if got == expected and point_count(settings, database, "dead_letter") == dead_letters:
                break
            assert loader.alive(), (tmp_path / "connector.log").read_text()[-3000:]
            time.sleep(2)
        for measurement, identities in expected.items():
            assert got[measurement] == identities, (measurement, len(got[measurement]), len(identities))
        assert point_count(settings, database, "dead_letter") == dead_letters

        time.sleep(12)  # two more scrapes of the long-running services
        thing = sorted(expected["joined"])[0][0]
        results = check_dashboards(settings, started_ms - len(expected_raw) * ROW_SPACING_MS - 60_000,
                                   int(time.time() * 1000) + 5_000, {"thing": thing}, database=database)
        failed = [f"{r.dashboard} / {r.panel} / {r.ref_id}: {r.error or 'no data'} :: {r.query[:200]}"
                  for r in results if r.error or not r.series]
        assert results and not failed, "\n".join(failed)
    finally:
        for service in reversed(services):
            if service.alive():
                service.terminate(60)
        for target in targets:
            (settings.run_dir / "prometheus" / "targets" / f"{target}.json").unlink(missing_ok=True)
        drop_database(settings, database)
