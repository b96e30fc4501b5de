"""What InfluxDB must hold, computed from what Kafka committed: the identity of every point
(docs/influxdb-schema.md) per measurement, on both sides."""
from __future__ import annotations

from db_connector.lineprotocol import NS_PER_MS
from stacktools.influx import InfluxClient
from streamkit.config import Settings
from streamkit.kafka_io import read_to_end
from streamkit.wire import AvroCodec, window_label


#: Key of the undecodable records a test writes into the late topic on purpose, so the
#: connector dead-letters them (in its transactional path); they make no point.
POISON_KEY = b"poison-for-the-connector"


def committed_identities(settings: Settings, topics: dict[str, str]) -> dict[str, set]:
    """Per measurement, the identity of every point the committed Kafka records make."""
    decode = {kind: AvroCodec(schema).decode for kind, schema in
              (("joined", "joined"), ("aggregates", "aggregate"), ("late", "late"))}
    out: dict[str, set] = {"raw": set(), "joined": set(), "aggregate": set(), "late": set()}
    for message in read_to_end(settings, topics["raw"]):
        thing, quantity, time_ms = message.key().decode().rsplit("|", 2)
        out["raw"].add((thing, quantity, int(time_ms) * NS_PER_MS))
    for message in read_to_end(settings, topics["joined"]):
        r = decode["joined"](message.value())
        out["joined"].add((r["thing"], f"{r['left_quantity']}:{r['right_quantity']}", r["left_time_ms"],
                           r["right_time_ms"]))
    for message in read_to_end(settings, topics["aggregates"]):
        r = decode["aggregates"](message.value())
        window = window_label(r["window_kind"], r["window_size_ms"], r["window_slide_ms"])
        out["aggregate"].add((r["thing"], r["quantity"], window, r["window_start_ms"] * NS_PER_MS))
    for message in read_to_end(settings, topics["late"]):
        if message.key() == POISON_KEY:
            continue
        r = decode["late"](message.value())
        out["late"].add((r["thing"], r["quantity"], r["stage"], r["reason"], r["event_time_ms"] * NS_PER_MS))
    return out


def influx_identities(settings: Settings, database: str) -> dict[str, set]:
    def rows(measurement: str) -> list[dict]:
        return InfluxClient(settings).rows(database, f'SELECT * FROM "{measurement}"')

    return {
        "raw": {(r["thing"], r["quantity"], r["time"]) for r in rows("raw")},
        "joined": {(r["thing"], r["pair"], r["left_time_ms"], r["right_time_ms"]) for r in rows("joined")},
        "aggregate": {(r["thing"], r["quantity"], r["window"], r["time"]) for r in rows("aggregate")},
        "late": {(r["thing"], r["quantity"], r["stage"], r["reason"], r["time"]) for r in rows("late")},
    }


def point_count(settings: Settings, database: str, measurement: str) -> int:
    rows = InfluxClient(settings).rows(database, f'SELECT count(*) FROM "{measurement}"')
    return max((v for r in rows for k, v in r.items() if k.startswith("count_")), default=0)
