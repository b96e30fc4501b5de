"""verify --topics without a server: the block decoder against the wire contract's Avro reader,
and the record -> frame shaping of each topic compared with the expectation, with the semantics
of each topic (a second committed copy of a transactional record is duplicated, the raw topic's
re-sends collapse to the last per key, the late topic holds one record per copy set aside)."""

from __future__ import annotations

import json
import math
from io import BytesIO
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stacktools.stack.settings import Settings
from stacktools.verify.avro_columns import Undecodable, decode_columns
from stacktools.verify.check import Outcome, verify
from stacktools.verify.compare import compare
from stacktools.verify.events import read_records
from stacktools.verify.expect import Expectation, expectation
from stacktools.verify.kafka_source import TOPICS, TopicsReader
from stacktools.verify.report import render
from stacktools.verify.rules import Pair, Rules, parse_windows
from streamkit.paths import REPO_ROOT
from streamkit.wire import AvroCodec, schema_before, schema_text
from streamkit.wire.registry import frame
from tests.support.verify_records import encoded, fields_of, records

SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"
RULES = Rules(
    (Pair("actSpeed_C11", "vaTorque_C11"),), None, parse_windows("10s", "20s/5s", "3s"), 10_000
)
KIND = {"raw": "raw", "joined": "joined", "aggregate": "aggregates", "late": "late"}

text = st.text(max_size=12)  # any Unicode but surrogates, which UTF-8 cannot hold
longs = st.integers(-(2**63), 2**63 - 1)
doubles = st.floats(allow_nan=True, allow_infinity=True)


def late_record() -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {
            "thing": text,
            "quantity": text,
            "event_time_ms": longs,
            "value": doubles,
            "row_id": text,
            "reason": text,
            "stage": text,
            "watermark_ms": st.none() | longs,
        }
    )


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


@pytest.fixture(scope="module")
def sample() -> tuple[Expectation, dict[str, list[bytes]]]:
    expected = expectation(read_records(SAMPLE), RULES)
    return expected, {k: [v for _, _, v in rs] for k, rs in records(expected).items()}


@settings(max_examples=60, deadline=None)
@given(st.lists(late_record(), max_size=40), st.booleans())
def test_the_block_decoder_reads_what_the_wire_contracts_reader_reads(items, framed) -> None:
    codec = AvroCodec("late")
    header = frame(7) if framed else b""
    values = [header + codec.encode(item) for item in items]
    text_fields = frozenset({"thing", "quantity", "reason", "stage"})
    columns = decode_columns("late", values, framed=framed, text=text_fields)
    assert columns["row_id"] is None  # checked, not kept
    for i, value in enumerate(values):
        body = value[len(header) :]
        want = codec.decode(body)
        for name in ("thing", "quantity", "reason", "stage"):
            assert columns[name][i] == want[name]
        for name in ("event_time_ms", "value"):
            assert same(float(want[name]) if name == "value" else want[name], columns[name][i])
        watermark = columns["watermark_ms"][i]
        if want["watermark_ms"] is None:
            assert math.isnan(watermark)
        else:  # as float64, like InfluxDB's integer fields read back: exact below 2**53
            assert watermark == float(want["watermark_ms"])


def test_every_schema_decodes_like_the_wire_contract(sample) -> None:
    for kind, values in sample[1].items():
        measurement = next(m for m, k in KIND.items() if k == kind)
        _, schema, text_fields = TOPICS[measurement]
        head = values[:500]
        columns = decode_columns(schema, head, text=text_fields)
        for i, value in enumerate(head):
            for name, want in fields_of(kind, value).items():
                got = columns[name]
                if got is None:
                    continue
                found = got[i]
                if want is None:
                    assert math.isnan(found), (kind, name)
                else:
                    assert same(want, found if isinstance(want, str) else type(want)(found))


def test_an_older_aggregate_without_closed_at_reads_as_null() -> None:
    current = json.loads(schema_text("aggregate"))
    older = fastavro.parse_schema(
        {**current, "fields": [f for f in current["fields"] if f["name"] != "closed_at_ms"]}
    )
    record = {
        "thing": "T1",
        "quantity": "q",
        "window_kind": "tumbling",
        "window_size_ms": 10_000,
        "window_slide_ms": 10_000,
        "window_start_ms": 0,
        "window_end_ms": 10_000,
        "count": 2,
        "mean": 1.5,
        "min": 1.0,
        "max": 2.0,
        "stddev": 0.5,
    }
    buffer = BytesIO()
    fastavro.schemaless_writer(buffer, older, record)
    new = encoded("aggregates", {**record, "closed_at_ms": 12_000})
    columns = decode_columns("aggregate", [buffer.getvalue(), new])
    assert math.isnan(columns["closed_at_ms"][0]) and columns["closed_at_ms"][1] == 12_000


def test_an_older_joined_pair_without_a_component_reads_as_an_explicit_pairs() -> None:
    record = {
        "id": "i",
        "thing": "T1",
        "left_quantity": "s_C1",
        "right_quantity": "t_C1",
        "left_time_ms": 1,
        "right_time_ms": 2,
        "left_value": 1.0,
        "right_value": 2.0,
        "result_name": "product",
        "result": 2.0,
        "event_time_ms": 2,
    }
    buffer = BytesIO()
    fastavro.schemaless_writer(
        buffer, fastavro.parse_schema(json.loads(schema_before("joined"))), record
    )
    new = AvroCodec("joined").encode({**record, "component": "C1"})
    columns = decode_columns("joined", [buffer.getvalue(), new], text=frozenset({"component"}))
    assert list(columns["component"]) == ["", "C1"]
    assert list(columns["left_time_ms"]) == [1, 1]


@pytest.mark.parametrize(
    "damage, framed",
    [
        (lambda v: v[:-1], False),  # cut short
        (lambda v: v + b"\x00", False),  # a byte too many
        (lambda v: v, True),  # no registry header where one is expected
        (lambda v: b"\x01\x00\x00\x00\x07" + v, True),  # a wrong magic byte
        (lambda v: v[:1] + b"\xff\xfe" + v[3:], False),  # the Thing's text is not UTF-8
    ],
)
def test_a_record_that_is_not_the_schemas_avro_is_refused(damage, framed) -> None:
    good = encoded(
        "raw",
        {"thing": "T1", "quantity": "q", "event_time_ms": 5, "value": 1.0, "row_id": "r"},
    )
    assert good[0] == 4  # "T1": length 2, zigzag
    with pytest.raises(Undecodable):
        decode_columns(
            "measurement", [good, damage(good)], framed=framed, text=frozenset({"thing"})
        )


class Offline(TopicsReader):
    """The topics reader on given values instead of a broker: everything after the read."""

    def __init__(self, values: dict[str, list[bytes]]) -> None:
        super().__init__(Settings.from_sources(environ={}))
        self.given = values

    def columns(self, measurement: str) -> dict[str, Any]:
        _, schema, text_fields = TOPICS[measurement]
        return decode_columns(schema, self.given[KIND[measurement]], text=text_fields)


def verdicts(reader: TopicsReader, expected: Expectation) -> dict:
    found = reader.read()
    out = {}
    for m in found:
        want, got, keys = reader.compared(m, expected, found[m])
        out[m] = compare(m, want, got, None, keys=keys)
    return out


def counts(verdict) -> tuple[int, int, int, int]:
    c = verdict.counts
    return c["missing"], c["extra"], c["duplicated"], c["different"]


def test_the_sample_written_as_the_stages_would_is_exact(sample) -> None:
    expected, values = sample
    result = verdicts(Offline(values), expected)
    for m, verdict in result.items():
        assert verdict.exact and (verdict.matched or m == "late"), (m, verdict.as_dict())
    assert result["joined"].matched == int((~expected.frames["joined"]["pending"]).sum())
    assert result["raw"].matched == len(expected.frames["raw"])


def test_a_second_committed_copy_is_duplicated_and_a_changed_value_different(sample) -> None:
    expected, values = sample
    doubled = dict(values, joined=[*values["joined"], values["joined"][10]])
    result = verdicts(Offline(doubled), expected)
    assert counts(result["joined"]) == (0, 0, 1, 0), result["joined"].as_dict()
    assert result["joined"].examples["duplicated"][0]["points"] == 2

    window = fields_of("aggregates", values["aggregates"][3])
    changed = encoded("aggregates", {**window, "mean": window["mean"] + 0.5})
    tampered = dict(
        values, aggregates=[*values["aggregates"][:3], changed, *values["aggregates"][4:]]
    )
    result = verdicts(Offline(tampered), expected)
    assert counts(result["aggregate"]) == (0, 0, 0, 1)
    assert set(result["aggregate"].examples["different"][0]["values"]) == {"mean"}

    pair = fields_of("joined", values["joined"][5])
    moved = encoded("joined", {**pair, "event_time_ms": pair["event_time_ms"] + 1})
    tampered = dict(values, joined=[*values["joined"][:5], moved, *values["joined"][6:]])
    result = verdicts(Offline(tampered), expected)
    assert counts(result["joined"]) == (0, 0, 0, 1)
    assert set(result["joined"].examples["different"][0]["values"]) == {"time_ns"}

    missing = dict(values, raw=values["raw"][:7] + values["raw"][8:])
    result = verdicts(Offline(missing), expected)
    assert counts(result["raw"]) == (1, 0, 0, 0)


def test_raw_re_sends_collapse_to_the_last_copy_per_key(sample) -> None:
    expected, values = sample
    resent = values["raw"][:50]  # a bridge restart re-sends what it had not acknowledged
    reader = Offline(dict(values, raw=[*values["raw"], *resent]))
    result = verdicts(reader, expected)
    assert result["raw"].exact and result["raw"].matched == len(expected.frames["raw"])
    assert reader.notes()["raw"].startswith("50 re-sent copies collapsed")
    outcome = Outcome(list(result.values()), 1, 1, source=reader.label, notes=reader.notes())
    assert "50 re-sent copies collapsed" in render(outcome)
    assert "EXACT: the Kafka topics hold exactly" in render(outcome)

    # a later copy with another value is what the key means now (compaction keeps it)
    first = fields_of("raw", values["raw"][0])
    later = encoded("raw", {**first, "value": first["value"] + 1})
    result = verdicts(Offline(dict(values, raw=[*values["raw"], later])), expected)
    assert counts(result["raw"]) == (0, 0, 0, 1)


def write_events(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_late_topic_holds_one_record_per_copy_set_aside(tmp_path: Path) -> None:
    """A row sent three times: the join and the aggregate each set two copies aside under one
    identity; both must be on the topic, once each (InfluxDB keeps one point)."""
    rows = [
        {
            "Thing": "T1",
            "Timestamp": 1_554_076_800_000 + 1000 * i,
            "id": f"r{i}",
            "actSpeed_C11": float(i),
            "vaTorque_C11": 2.0 * i,
        }
        for i in range(30)
    ]
    rows = rows[:10] + [rows[9], rows[9]] + rows[10:]
    events = write_events(tmp_path / "events.json", rows)
    expected = expectation(read_records(events, order="file"), RULES)
    assert expected.late_records is not None
    assert len(expected.late_records) == 8 and len(expected.frames["late"]) == 4
    values = {k: [v for _, _, v in rs] for k, rs in records(expected).items()}
    assert all(verdicts(Offline(values), expected)[m].exact for m in KIND)

    once = dict(values, late=values["late"][::2])  # one copy of each lost
    result = verdicts(Offline(once), expected)
    assert counts(result["late"]) == (4, 0, 0, 0)
    thrice = dict(values, late=[*values["late"], values["late"][0]])
    result = verdicts(Offline(thrice), expected)
    assert counts(result["late"]) == (0, 0, 1, 0), result["late"].as_dict()
    assert result["late"].examples["duplicated"][0]["points"] == 2


def test_shaped_columns_are_the_points_columns(sample) -> None:
    """The mapping of docs/influxdb-schema.md: one case per topic, by hand."""
    expected, values = sample
    found = Offline(values).read()
    pair = found["joined"].iloc[0]
    assert ":" in str(pair["pair"]) and pair["time_ns"] % 1_000_000 == 0
    assert pair["time_ns"] // 1_000_000 == max(pair["left_time_ms"], pair["right_time_ms"])
    windows = found["aggregate"]
    assert set(windows["window"].astype(str)) == {
        "tumbling-10000",
        "sliding-20000-5000",
        "session-3000",
    }
    session = windows[windows["window"] == "session-3000"].iloc[0]
    assert session["duration_ms"] == session["window_end_ms"] - session["start_ms"]
    assert np.isnan(windows[windows["window"] == "tumbling-10000"]["duration_ms"]).all()
    assert isinstance(found["raw"]["thing"].dtype, pd.CategoricalDtype)


def test_live_on_the_topics_requires_only_what_is_certain_so_far(sample) -> None:
    """A live run's topics hold what was committed so far: every record up to some moment.
    Through the whole check (stacktools.verify.check) with the topics as the source, that is
    exact with --live; an old record missing is still named."""
    expected, values = sample
    moment = int(expected.frames["raw"]["time_ms"].quantile(0.6))

    def before(kind: str, value: bytes) -> bool:
        f = fields_of(kind, value)
        if kind == "joined":
            return max(f["left_time_ms"], f["right_time_ms"]) <= moment
        if kind == "aggregates":
            return f["closed_at_ms"] is not None and f["closed_at_ms"] <= moment
        return f["event_time_ms"] <= moment

    so_far = {k: [v for v in vs if before(k, v)] for k, vs in values.items()}
    assert 0 < len(so_far["raw"]) < len(values["raw"])
    settings = Settings.from_sources(environ={})
    outcome = verify(settings, SAMPLE, "", RULES, live_margin_ms=60_000, source=Offline(so_far))
    assert outcome.exact and outcome.live, render(outcome)
    assert all(v.uncertain for v in outcome.verdicts if v.measurement != "late")
    assert not verify(settings, SAMPLE, "", RULES, source=Offline(so_far)).exact  # not live

    lost = dict(so_far, raw=so_far["raw"][1:])
    outcome = verify(settings, SAMPLE, "", RULES, live_margin_ms=60_000, source=Offline(lost))
    raw = next(v for v in outcome.verdicts if v.measurement == "raw")
    assert raw.counts["missing"] == 1 and not outcome.exact


def test_a_bridge_re_send_set_aside_as_late_is_counted_apart_on_the_topic(sample) -> None:
    """A re-sent raw record reaches the stages twice: the copy they set aside lands on the late
    topic, with the file's value (stacktools.verify.resends): not extra; another value is."""
    expected, values = sample
    first = fields_of("raw", values["raw"][0])
    copy = {**first, "reason": "duplicate", "stage": "aggregate", "watermark_ms": None}
    settings = Settings.from_sources(environ={})
    resent = dict(values, raw=[*values["raw"], values["raw"][0]], late=[encoded("late", copy)])
    outcome = verify(settings, SAMPLE, "", RULES, source=Offline(resent))
    late = next(v for v in outcome.verdicts if v.measurement == "late")
    assert outcome.exact and late.resent == 1, render(outcome)
    changed = encoded("late", {**copy, "value": first["value"] + 1})
    outcome = verify(settings, SAMPLE, "", RULES, source=Offline(dict(values, late=[changed])))
    late = next(v for v in outcome.verdicts if v.measurement == "late")
    assert late.counts["extra"] == 1 and not outcome.exact
