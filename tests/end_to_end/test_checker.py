"""The end-to-end check itself, shown to catch what it is for. The oracle's own outputs for a
slice of the sample (late records at both stages included: the file is not in time order) are
written to the output topics as a perfect pipeline would, the real connector loads them into
InfluxDB, and the check passes. Then a joined record is written twice and an aggregate is
written again with a wrong mean, and a raw point is overwritten in InfluxDB with a wrong value:
each is named, at the level where it shows. The duplicate shows only in Kafka (InfluxDB
collapses it onto its own point), which is why the committed topics are judged too."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import fastavro
import pytest

from lsb.results import pair_id
from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring, private_database, private_topic
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.kafka_clients import idempotent_producer
from streamkit.paths import REPO_ROOT
from streamkit.wire import thing_partition
from streamkit.wire.retention import source
from tests.oracles.pipeline import Outputs, expected_outputs
from tests.oracles.rows import file_rows, measurements
from tests.support.exactness import PIPELINE, assert_pipeline_exact, judge_pipeline
from tests.support.judge import parsed_schema_file
from tests.support.waits import settle

pytestmark = [pytest.mark.stack]
SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"
KINDS = ("raw", "joined", "aggregates", "late")
PARTITIONS = 2


def encoder(schema: str):
    parsed = parsed_schema_file(schema)

    def encode(record: dict) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, record)
        return out.getvalue()

    return encode


def kafka_records(outputs: Outputs) -> list[tuple[str, bytes, bytes]]:
    """(kind, key, value) of every record, keyed as the wire contract says."""
    encode = {
        kind: encoder(schema)
        for kind, schema in (
            ("raw", "measurement"),
            ("joined", "joined"),
            ("aggregates", "aggregate"),
            ("late", "late"),
        )
    }
    out = []
    for r in outputs.raw + outputs.late:
        kind = "late" if "stage" in r else "raw"
        out.append(
            (kind, f"{r['thing']}|{r['quantity']}|{r['event_time_ms']}".encode(), encode[kind](r))
        )
    for r in outputs.joined:
        ident = pair_id(
            r["thing"],
            r["left_quantity"],
            r["right_quantity"],
            r["left_time_ms"],
            r["right_time_ms"],
        )
        out.append(("joined", ident.encode(), encode["joined"]({**r, "id": ident})))
    for r in outputs.aggregates:
        label = f"{r['window_kind']}-{r['window_size_ms']}"
        out.append(
            (
                "aggregates",
                f"{r['thing']}|{r['quantity']}|{label}|{r['window_start_ms']}".encode(),
                encode["aggregates"](r),
            )
        )
    return out


def produce(
    settings: Settings, topics: dict[str, str], records: list[tuple[str, bytes, bytes]]
) -> None:
    """Partitioned by thing, as every stage writes: a key's records stay in order."""
    producer = idempotent_producer(settings, "checker-test-feed")
    for kind, key, value in records:
        thing = key.decode().split("|")[0] if kind != "joined" else "joined"
        producer.produce(topics[kind], value, key, partition=thing_partition(thing, PARTITIONS))
        producer.poll(0)
    assert producer.flush(60) == 0


@pytest.fixture
def lane(stack_settings: Settings, tmp_path: Path) -> Iterator[tuple[dict[str, str], str]]:
    topics = {kind: private_topic(stack_settings, kind, PARTITIONS) for kind in (*KINDS, "dlq")}
    database = private_database(stack_settings)
    wiring = Wiring.for_connector(topics, f"db-connector-{database}", database)
    connector = service_process(
        "db_connector", wiring, tmp_path / "connector.log", "--flush-interval", "200ms"
    )
    connector.start()
    yield topics, database
    code = connector.terminate()
    assert code == 0, (code, (tmp_path / "connector.log").read_text()[-3000:])
    InfluxClient(stack_settings).drop_database(database)


def test_the_check_passes_on_the_oracle_and_names_a_duplicate_and_wrong_values(
    stack_settings: Settings, lane: tuple[dict[str, str], str], tmp_path: Path
) -> None:
    topics, database = lane
    events = tmp_path / "events.json"
    events.write_bytes(b"\n".join(SAMPLE.read_bytes().splitlines()[:600]) + b"\n")
    records = measurements(file_rows(events))
    perfect = expected_outputs(PIPELINE, records)
    assert (
        perfect.joined
        and perfect.aggregates
        and {r["stage"] for r in perfect.late} == {"join", "aggregate"}
    )
    records_out = kafka_records(perfect)
    produce(stack_settings, topics, records_out)
    judged = {kind: topics[kind] for kind in KINDS}
    print(assert_pipeline_exact(stack_settings, judged, database, PIPELINE, records, timeout_s=120))

    twice = next(r for r in records_out if r[0] == "joined")
    window = perfect.aggregates[0]
    wrong_mean = {**window, "mean": window["mean"] + 1.0}
    key = next(
        k
        for kind, k, _ in records_out
        if kind == "aggregates"
        and k.decode().endswith(f"|{window['window_start_ms']}")
        and k.decode().startswith(f"{window['thing']}|{window['quantity']}|")
    )
    produce(stack_settings, topics, [twice, ("aggregates", key, encoder("aggregate")(wrong_mean))])
    raw = perfect.raw[0]
    assert (
        InfluxClient(stack_settings).write(
            database,
            [
                f"raw,quantity={raw['quantity']},thing={raw['thing']} value={raw['value'] + 0.5!r} "
                f"{raw['event_time_ms'] * 1_000_000}"
            ],
        )
        == 204
    )

    def wrong_mean_landed() -> bool:
        rows = InfluxClient(stack_settings).rows(
            database,
            f'SELECT "mean" FROM {source("aggregate")} '
            f"WHERE time = {window['window_start_ms'] * 1_000_000}",
        )
        return any(r["mean"] == wrong_mean["mean"] for r in rows)

    assert settle(wrong_mean_landed, 60, "the connector writing the wrong mean")
    verdicts = {
        v.what: v for v in judge_pipeline(stack_settings, judged, database, PIPELINE, records)
    }
    joined_identity = (
        perfect.joined[0]["thing"],
        perfect.joined[0]["left_quantity"],
        perfect.joined[0]["right_quantity"],
        perfect.joined[0]["left_time_ms"],
        perfect.joined[0]["right_time_ms"],
    )
    window_identity = (
        window["thing"],
        window["quantity"],
        "tumbling",
        10_000,
        10_000,
        window["window_start_ms"],
    )
    assert verdicts["kafka joined"].duplicated == [(joined_identity, 2, 1)]
    assert verdicts["influxdb joined"].exact  # InfluxDB hides the duplicate: one point
    assert verdicts["kafka aggregates"].duplicated == [(window_identity, 2, 1)]
    assert [k for k, _ in verdicts["kafka aggregates"].different] == [window_identity]
    (different,) = verdicts["influxdb aggregate"].different
    assert different[1] == {"mean": (window["mean"], wrong_mean["mean"])}
    (different,) = verdicts["influxdb raw"].different
    assert different[1] == {"value": (raw["value"], raw["value"] + 0.5)}
    assert (
        verdicts["kafka raw"].exact
        and verdicts["kafka late"].exact
        and verdicts["influxdb late"].exact
    )
    wrong = [what for what, v in verdicts.items() if not v.exact]
    assert sorted(wrong) == [
        "influxdb aggregate",
        "influxdb raw",
        "kafka aggregates",
        "kafka joined",
    ], wrong
