"""Reads back what the pipeline committed (Kafka, read_committed) and what InfluxDB holds, and
judges both against the oracle's outputs by value. The records are decoded with fastavro from
the schema files, not with the services' codec, so an encoding bug cannot cancel itself out."""

from __future__ import annotations

import io
import json
import re

import fastavro

from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.kafka_io import read_to_end
from streamkit.wire.resources import schema_file
from streamkit.wire.retention import source
from tests.oracles.pipeline import Outputs
from tests.oracles.points import Identity
from tests.oracles.rows import Measurement
from tests.support.messages import key_of, value_of
from tests.support.verdict import Table, Verdict, compare, table

#: Each topic's record identity: what makes two of its records the same record.
IDENTITY = {
    "raw": lambda r: (r["thing"], r["quantity"], r["event_time_ms"]),
    "joined": lambda r: (
        r["thing"],
        r["left_quantity"],
        r["right_quantity"],
        r["left_time_ms"],
        r["right_time_ms"],
    ),
    "aggregates": lambda r: (
        r["thing"],
        r["quantity"],
        r["window_kind"],
        r["window_size_ms"],
        r["window_slide_ms"],
        r["window_start_ms"],
    ),
    "late": lambda r: (
        r["stage"],
        r["thing"],
        r["quantity"],
        r["event_time_ms"],
        r["row_id"],
        r["reason"],
    ),
}
SCHEMAS = {"raw": "measurement", "joined": "joined", "aggregates": "aggregate", "late": "late"}
PAIR_ID = re.compile(r"[0-9a-f]{32}")
MEASUREMENTS = ("raw", "joined", "aggregate", "late")


def parsed_schema_file(schema: str) -> dict:
    """A schema of the package's schemas/ as fastavro reads it (not through the services' codec)."""
    parsed = fastavro.parse_schema(json.loads(schema_file(schema).read_text()))
    assert isinstance(parsed, dict), schema  # a record schema
    return parsed


def decoder(schema: str):
    parsed = parsed_schema_file(schema)
    return lambda value: fastavro.schemaless_reader(io.BytesIO(value), parsed, None)


def committed_outputs(
    settings: Settings, topics: dict[str, str], skip_keys: frozenset[bytes] = frozenset()
) -> Outputs:
    """Every committed record of the four output topics, in offset order per partition; a
    joined record must be keyed by a pair id, a measurement or late record by
    thing|quantity|time."""
    out = Outputs()
    for kind, schema in SCHEMAS.items():
        decode = decoder(schema)
        records = getattr(out, kind)
        for message in read_to_end(settings, topics[kind]):
            if message.key() in skip_keys:
                continue
            r = decode(value_of(message))
            key = key_of(message).decode()
            if kind == "joined":
                assert PAIR_ID.fullmatch(key) and key == r["id"], (key, r["id"])
                del r["id"]
            elif kind in ("raw", "late"):
                assert key == f"{r['thing']}|{r['quantity']}|{r['event_time_ms']}", (kind, key, r)
            records.append(r)
    return out


def arrival(outputs: Outputs) -> list[Measurement]:
    """The raw topic's records as the stages read them (re-sends included)."""
    return [
        Measurement(r["thing"], r["quantity"], r["event_time_ms"], r["value"], r["row_id"])
        for r in outputs.raw
    ]


def influx_points(settings: Settings, database: str) -> dict[Identity, dict]:
    """Every point of the pipeline's measurements: tags told from fields by SHOW TAG KEYS."""
    client = InfluxClient(settings)
    points: dict[Identity, dict] = {}
    for measurement in MEASUREMENTS:
        tags = {
            row["tagKey"]
            for row in client.rows(database, f"SHOW TAG KEYS FROM {source(measurement)}")
        }
        for row in client.rows(database, f"SELECT * FROM {source(measurement)}"):
            time_ns = row.pop("time")
            tag_set = tuple(
                sorted((k, v) for k, v in row.items() if k in tags and v not in (None, ""))
            )
            points[(measurement, tag_set, time_ns)] = {
                k: v for k, v in row.items() if k not in tags and v is not None
            }
    return points


def judge_topics(want: Outputs, got: Outputs) -> list[Verdict]:
    """Each output topic against the oracle's records. The raw topic may hold identical copies
    (the bridge re-sends after a restart; compaction keeps one): they count once."""
    return [
        compare(
            f"kafka {kind}",
            table(getattr(want, kind), IDENTITY[kind]),
            table(getattr(got, kind), IDENTITY[kind]),
            copies_allowed=kind == "raw",
        )
        for kind in IDENTITY
    ]


def judge_points(want: dict[Identity, dict], got: dict[Identity, dict]) -> list[Verdict]:
    """InfluxDB per measurement against the oracle's points (one per identity on both sides)."""

    def by_measurement(points: dict[Identity, dict], measurement: str) -> Table:
        return {key: [fields] for key, fields in points.items() if key[0] == measurement}

    return [
        compare(f"influxdb {m}", by_measurement(want, m), by_measurement(got, m))
        for m in MEASUREMENTS
    ]
