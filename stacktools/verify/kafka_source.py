"""The run's Kafka output topics as verify's source: raw, joined, aggregates and late, read
instead of InfluxDB and shaped into the same frames (docs/influxdb-schema.md maps a record to a
point; here the same mapping gives the same columns).

Each topic is read with streamkit's reader: a fresh consumer without a group, assigned from the
beginning of every partition up to the end offsets taken when verify starts, read_committed, so
records of aborted transactions are never seen and control records are skipped (on a live run:
what is committed so far). Values are decoded in blocks (stacktools.verify.avro_columns), with
the registry header when SCHEMA_REGISTRY is on.

What counts as one record differs from InfluxDB, which overwrites a point written twice:
- joined, aggregates, late are written in Spark's transactions: each record must be there
  exactly once among the committed messages; a second committed copy is ``duplicated``, the
  exactly-once failure InfluxDB's overwrite would hide. The late topic legitimately holds one
  record per copy set aside (a row sent three times is set aside twice under one identity):
  the expectation keeps every copy, and copies beyond the expected ones are ``duplicated``.
- raw is written by the bridge at least once (an MQTT message is acknowledged only after Kafka
  confirmed its records; a restart re-sends the rest, byte-identical under the same key) into a
  compacted topic: what it means is the last value per key, as compaction will leave it. Copies
  of a key are collapsed to the last one read (a key's copies share a partition, in order), and
  the report counts them.
- the operation statistics' topic holds one record per cycle with its bands as arrays: decoded
  one record at a time with the wire contract's codec (a cycle per component per ten minutes is
  few), and shaped into the ``opstats`` and ``opstats_band`` points the connector makes.
- the topics carry event times in milliseconds: a joined point's sub-millisecond discriminator
  and its ``long_gap_ms`` tag are the connector's, derived from the two times the record holds;
  the pair's time is compared to the millisecond (its ``event_time_ms``).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from confluent_kafka import KafkaException
from pandas.api.types import union_categoricals

from stacktools.verify.avro_columns import Undecodable, decode_columns
from stacktools.verify.expect import Expectation
from stacktools.verify.points import KEYS, MEASUREMENTS, NS_PER_MS, VALUES
from streamkit.config import KafkaSettings
from streamkit.errors import StackError, TimedOut
from streamkit.kafka_io import end_offsets, read_up_to, retry_transient
from streamkit.wire import AvroCodec
from streamkit.wire.registry import unframe

#: measurement -> (topic setting, schema, the string fields kept as text)
TOPICS = {
    "raw": ("raw_topic", "measurement", frozenset({"thing", "quantity"})),
    "joined": (
        "joined_topic",
        "joined",
        frozenset({"thing", "left_quantity", "right_quantity", "result_name", "component"}),
    ),
    "aggregate": ("aggregates_topic", "aggregate", frozenset({"thing", "quantity", "window_kind"})),
    "late": ("late_topic", "late", frozenset({"thing", "quantity", "reason", "stage"})),
}
#: The statistics' topic setting: one topic, two measurements.
STATS_TOPIC = "opstats_topic"
#: Records decoded together (bounds the memory of a block's index arrays).
BLOCK = 1 << 18
#: Whole topics are read: fetches larger than a consumer's default (a partition's share of a
#: fetch is what bounds the read on a loaded broker).
FETCH = {"max.partition.fetch.bytes": 16 << 20, "fetch.max.bytes": 64 << 20}
#: Reading a topic to its end may take this long, plus a second per RECORDS_PER_SECOND records
#: (a transaction left open stops read_committed before the end: that is what times out).
READ_TIMEOUT_S = 120.0
RECORDS_PER_SECOND = 20_000
#: The late topic's extra identity: which copy of (thing, quantity, stage, reason, time) it is.
COPY = "copy"


class TopicsError(StackError):
    """A topic that could not be read to its end, or holds records that are not our Avro."""


class TopicsReader:
    label = "the Kafka topics"

    def __init__(self, settings: KafkaSettings, suffix: str = "") -> None:
        """``suffix``: a run's own copies of the topics, ``<topic>.<suffix>`` (the demo's)."""
        self.settings = settings
        fields = {m: field for m, (field, _, _) in TOPICS.items()}
        fields.update(opstats=STATS_TOPIC, opstats_band=STATS_TOPIC, overload="overloads_topic")
        self.topics = {
            m: getattr(settings, field) + (f".{suffix}" if suffix else "")
            for m, field in fields.items()
        }
        self._notes: dict[str, str] = {}
        self._cycles: list[dict[str, Any]] | None = None

    def read(self, measurements: tuple[str, ...] = MEASUREMENTS) -> dict[str, pd.DataFrame]:
        self._notes, self._cycles = {}, None
        return {m: self.measurement(m) for m in measurements}

    def notes(self) -> dict[str, str]:
        return dict(self._notes)

    @property
    def framed(self) -> bool:
        return bool(getattr(self.settings, "schema_registry", False))

    def values(self, measurement: str) -> Iterator[bytes]:
        """Every committed record's value of the measurement's topic, in the order read."""
        topic = self.topics[measurement]
        try:
            ends = retry_transient(
                partial(end_offsets, self.settings, topic, role="verify-ends", strict=True)
            )
            timeout_s = READ_TIMEOUT_S + sum(ends.values()) / RECORDS_PER_SECOND
            for message in read_up_to(
                self.settings, topic, ends, timeout_s=timeout_s, role="verify", overrides=FETCH
            ):
                value = message.value()
                if value is None:
                    raise TopicsError(f"Kafka topic {topic}: a record without a value")
                yield value
        except KafkaException as exc:
            raise TopicsError(f"Kafka topic {topic}: {exc.args[0].str()}") from None
        except TimedOut as exc:
            raise TopicsError(f"{exc} (a transaction left open?)") from None

    def _undecodable(self, measurement: str, why: object) -> TopicsError:
        registry = "on" if self.framed else "off"
        return TopicsError(
            f"Kafka topic {self.topics[measurement]}: {why} (SCHEMA_REGISTRY is {registry} "
            "here: it must be the run's)"
        )

    def columns(self, measurement: str) -> dict[str, Any]:
        """Every committed record of the measurement's topic, decoded in blocks."""
        _, schema, text = TOPICS[measurement]
        blocks, values = [], []
        try:
            for value in self.values(measurement):
                values.append(value)
                if len(values) >= BLOCK:
                    blocks.append(decode_columns(schema, values, framed=self.framed, text=text))
                    values = []
            if values or not blocks:
                blocks.append(decode_columns(schema, values, framed=self.framed, text=text))
        except Undecodable as exc:
            raise self._undecodable(measurement, exc) from None
        return _joined_blocks(blocks)

    def cycles(self) -> list[dict[str, Any]]:
        """The statistics' records (read once for both measurements)."""
        if self._cycles is None:
            self._cycles = self.decoded("opstats", "opstats")
        return self._cycles

    def decoded(self, measurement: str, schema: str) -> list[dict[str, Any]]:
        """A topic's records decoded one by one with the wire contract's codec (few records:
        one per cycle, or per alert)."""
        codec, out = AvroCodec(schema), []
        for value in self.values(measurement):
            try:
                out.append(codec.decode(unframe(value)[1] if self.framed else value))
            except Exception as exc:  # fastavro raises EOFError, ValueError, ...
                raise self._undecodable(
                    measurement, f"not Avro {schema}: {type(exc).__name__}: {exc}"
                ) from None
        return out

    def measurement(self, measurement: str) -> pd.DataFrame:
        """One topic's records as the points the connector makes of them."""
        if measurement == "opstats":
            return cycle_points(self.cycles())
        if measurement == "opstats_band":
            return band_points(self.cycles())
        if measurement == "overload":
            return overload_points(self.decoded("overload", "overload"))
        shape = {
            "raw": self._raw,
            "joined": self._joined,
            "aggregate": self._aggregate,
            "late": self._late,
        }[measurement]
        return shape(self.columns(measurement))

    def compared(
        self, measurement: str, expectation: Expectation, found: pd.DataFrame
    ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
        want = expectation.frames[measurement]
        if measurement == "joined":
            want = want.copy()
            want["time_ns"] = want["time_ns"] // NS_PER_MS * NS_PER_MS
            want["long_gap_ms"] = np.nan
        if measurement == "late":
            records = expectation.late_records
            want, found = numbered_copies(records if records is not None else want, found)
            return want, found, [*KEYS["late"], COPY]
        return want, found, KEYS[measurement]

    # the record -> point mapping of docs/influxdb-schema.md, per topic
    def _raw(self, c: dict) -> pd.DataFrame:
        frame = pd.DataFrame(
            {
                "thing": c["thing"],
                "quantity": c["quantity"],
                "time_ms": c["event_time_ms"],
                "value": c["value"],
            }
        )
        frame["time_ns"] = frame["time_ms"] * NS_PER_MS
        read = len(frame)
        frame = frame.drop_duplicates(KEYS["raw"], keep="last").reset_index(drop=True)
        if len(frame) < read:
            self._notes["raw"] = (
                f"{read - len(frame):,} re-sent copies collapsed (compacted topic: last per key)"
            )
        return frame

    def _joined(self, c: dict) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "thing": c["thing"],
                "pair": _pairs(c["left_quantity"], c["right_quantity"]),
                "left_time_ms": c["left_time_ms"],
                "right_time_ms": c["right_time_ms"],
                "time_ns": c["event_time_ms"] * NS_PER_MS,
                "result_name": c["result_name"],
                "component": c["component"],
                "long_gap_ms": np.full(len(c["result"]), np.nan),
                "result": c["result"],
                "left_value": c["left_value"],
                "right_value": c["right_value"],
            }
        )

    def _aggregate(self, c: dict) -> pd.DataFrame:
        start, end = c["window_start_ms"], c["window_end_ms"]
        kind = c["window_kind"]
        session = np.asarray(kind == "session") if len(start) else np.zeros(0, bool)
        return pd.DataFrame(
            {
                "thing": c["thing"],
                "quantity": c["quantity"],
                "window": _window_labels(kind, c["window_size_ms"], c["window_slide_ms"]),
                "start_ms": start,
                "time_ns": start * NS_PER_MS,
                "count": c["count"],
                "mean": c["mean"],
                "min": c["min"],
                "max": c["max"],
                "stddev": c["stddev"],
                "window_end_ms": end,
                "duration_ms": np.where(session, (end - start).astype(np.float64), np.nan),
                "closed_at_ms": c["closed_at_ms"],
            }
        )

    def _late(self, c: dict) -> pd.DataFrame:
        time_ms = c["event_time_ms"]
        return pd.DataFrame(
            {
                "thing": c["thing"],
                "quantity": c["quantity"],
                "stage": c["stage"],
                "reason": c["reason"],
                "time_ms": time_ms,
                "time_ns": time_ms * NS_PER_MS,
                "value": c["value"],
                "watermark_ms": c["watermark_ms"],
                "count": np.ones(len(time_ms)),
            }
        )


def cycle_points(cycles: list[dict[str, Any]]) -> pd.DataFrame:
    """The ``opstats`` point of each cycle record (docs/influxdb-schema.md)."""
    rows = []
    for r in cycles:
        rated_w, data_ms = r["rated_power_kw"] * 1000.0, r["data_ms"]
        cycle_ms = r["cycle_end_ms"] - r["cycle_start_ms"]
        rows.append(
            {
                "thing": r["thing"],
                "component": r["component"],
                "rating": r["rating_id"],
                "start_ms": r["cycle_start_ms"],
                "time_ns": r["cycle_start_ms"] * NS_PER_MS,
                "power": r["power_name"],
                "duty_pct": r["duty_pct"],
                "duty_rating_pct": r["duty_rating_pct"],
                "motoring_kwh": r["motoring_kwh"],
                "regenerative_kwh": r["regenerative_kwh"],
                "energy_kwh": r["motoring_kwh"] + r["regenerative_kwh"],
                "mean_w": r["mean_w"],
                "mean_pct": 100.0 * r["mean_w"] / rated_w,
                "peak_w": r["peak_w"],
                "peak_pct": 100.0 * r["peak_w"] / rated_w,
                "rated_power_kw": r["rated_power_kw"],
                "data_s": data_ms / 1000.0,
                "no_data_s": (cycle_ms - data_ms) / 1000.0,
                "overload_s": r["band_ms"][-1] / 1000.0 if r["band_ms"] else np.nan,
                "duty_exceeded": int(r["duty_pct"] > r["duty_rating_pct"]),
                "rating_defaulted": int(r["rating_defaulted"]),
                "cycle_ms": cycle_ms,
            }
        )
    return pd.DataFrame(rows, columns=[*KEYS["opstats"], *VALUES["opstats"]])


def overload_points(events: list[dict[str, Any]]) -> pd.DataFrame:
    """The ``overload`` point of each alert record (docs/influxdb-schema.md)."""
    rows = [
        {
            "thing": r["thing"],
            "component": r["component"],
            "rating": r["rating_id"],
            "status": r["status"],
            "start_ms": r["cycle_start_ms"],
            "time_ns": r["cycle_start_ms"] * NS_PER_MS,
            "duty_pct": r["duty_pct"],
            "duty_rating_pct": r["duty_rating_pct"],
            "peak_pct": 100.0 * r["peak_w"] / (r["rated_power_kw"] * 1000.0),
            "overload_s": r["overload_ms"] / 1000.0,
            "since_ms": r["since_ms"],
            "cycle_end_ms": r["cycle_end_ms"],
            "why": r["why"],
        }
        for r in events
    ]
    return pd.DataFrame(rows, columns=[*KEYS["overload"], *VALUES["overload"]])


def band_points(cycles: list[dict[str, Any]]) -> pd.DataFrame:
    """The ``opstats_band`` points of each cycle record, one per band."""
    rows = []
    for r in cycles:
        for name, ms, total in zip(r["band_names"], r["band_ms"], r["cumulative_ms"], strict=False):
            rows.append(
                {
                    "thing": r["thing"],
                    "component": r["component"],
                    "rating": r["rating_id"],
                    "band": name,
                    "start_ms": r["cycle_start_ms"],
                    "time_ns": r["cycle_start_ms"] * NS_PER_MS,
                    "seconds": ms / 1000.0,
                    "cumulative_hours": total / 3_600_000.0,
                    "share_pct": 100.0 * ms / r["data_ms"] if r["data_ms"] else 0.0,
                }
            )
    return pd.DataFrame(rows, columns=[*KEYS["opstats_band"], *VALUES["opstats_band"]])


def _joined_blocks(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    if len(blocks) == 1:
        return blocks[0]
    out: dict[str, Any] = {}
    for name, first in blocks[0].items():
        parts = [b[name] for b in blocks]
        if first is None:
            out[name] = None
        elif isinstance(first, pd.Categorical):
            out[name] = union_categoricals(parts)
        else:
            out[name] = np.concatenate(parts)
    return out


def _pairs(left: pd.Categorical, right: pd.Categorical) -> pd.Categorical:
    """The ``pair`` tag, ``<left>:<right>``, built once per distinct combination."""
    combined = left.codes.astype(np.int64) * max(len(right.categories), 1) + right.codes
    distinct, codes = np.unique(combined, return_inverse=True)
    width = max(len(right.categories), 1)
    names = [f"{left.categories[d // width]}:{right.categories[d % width]}" for d in distinct]
    return _categorical(codes.reshape(-1), names)


def _window_labels(kind: pd.Categorical, size: np.ndarray, slide: np.ndarray) -> pd.Categorical:
    """The ``window`` tag: ``tumbling-<size>``, ``sliding-<size>-<slide>``, ``session-<gap>``
    (docs/influxdb-schema.md), built once per distinct window."""
    if not len(size):
        return pd.Categorical([])
    combos = pd.MultiIndex.from_arrays([kind.codes, size, slide])
    codes, distinct = pd.factorize(combos)
    names = []
    for code, size_ms, slide_ms in distinct:
        name = kind.categories[code]
        names.append(f"{name}-{size_ms}-{slide_ms}" if name == "sliding" else f"{name}-{size_ms}")
    return _categorical(np.asarray(codes), names)


def _categorical(codes: np.ndarray, names: list[str]) -> pd.Categorical:
    """Codes into a list of names that may repeat, as a categorical of distinct names."""
    distinct = sorted(set(names))
    position = {name: i for i, name in enumerate(distinct)}
    remap = np.array([position[n] for n in names], dtype=np.int64)
    return pd.Categorical.from_codes(remap[codes] if len(codes) else codes, categories=distinct)


def numbered_copies(want: pd.DataFrame, found: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The late topic: each identity's records numbered in order (COPY) on both sides; a found
    copy beyond the expected ones takes the last expected number, so that it shows as
    ``duplicated`` of that record rather than as an extra one."""
    keys = KEYS["late"]
    want, found = want.reset_index(drop=True).copy(), found.reset_index(drop=True).copy()
    text = {k: "string" for k in keys if k not in ("time_ms",)}
    want[COPY] = want.astype(text).groupby(keys, sort=False).cumcount().to_numpy()
    rank = found.astype(text).groupby(keys, sort=False).cumcount().to_numpy()
    counts = want.astype(text).groupby(keys).size().rename("expected").reset_index()
    expected = found[keys].astype(text).merge(counts, on=keys, how="left")["expected"]
    last = expected.fillna(1).to_numpy(np.int64) - 1
    found[COPY] = np.minimum(rank, last)
    return want, found
