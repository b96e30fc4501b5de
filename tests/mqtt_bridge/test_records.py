"""The bridge's records, built straight from a row, against the reference: fastavro's encoding
(AvroCodec) of each record's dict, the wire contract's key and partition."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mqtt_bridge.records import KafkaRecord, RowSplitter
from streamkit.events import Row, parse_row
from streamkit.wire import AvroCodec, thing_partition

CODEC = AvroCodec("measurement")
SAMPLE = Path(__file__).resolve().parents[1] / "data" / "test_events.json"
PARTITIONS = 6
#: One splitter for every example, as the bridge keeps one: what it caches between rows must
#: never change the bytes of a later row.
SPLITTER = RowSplitter(PARTITIONS)

# UTF-8 encodable, as validated rows are
texts = st.text(st.characters(blacklist_categories=["Cs"]))
quantity_names = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="|"), min_size=1
)
rows = st.builds(
    Row,
    thing=texts.filter(bool),
    timestamp_ms=st.integers(-(2**63), 2**63 - 1),
    row_id=texts,
    quantities=st.dictionaries(quantity_names, st.floats(allow_nan=False), min_size=1, max_size=12),
)


def reference(row: Row) -> tuple[int, list[dict[str, bytes]]]:
    """What each record must be, from the definitions: fastavro's bytes of the record's dict,
    the key ``thing|quantity|event time ms`` in UTF-8, the thing's partition."""
    return thing_partition(row.thing, PARTITIONS), [
        {
            "key": f"{row.thing}|{quantity}|{row.timestamp_ms}".encode(),
            "value": CODEC.encode(
                {
                    "thing": row.thing,
                    "quantity": quantity,
                    "event_time_ms": row.timestamp_ms,
                    "value": value,
                    "row_id": row.row_id,
                }
            ),
        }
        for quantity, value in row.quantities.items()
    ]


@settings(max_examples=1000, deadline=None)
@given(rows)
def test_records_are_the_codecs_bytes_for_any_row(row: Row) -> None:
    partition, batch = SPLITTER.batch(row)
    assert (partition, batch) == reference(row)
    assert SPLITTER.batch(row) == (partition, batch)  # a redelivered row: byte-identical records
    assert SPLITTER.split(row) == [KafkaRecord(r["key"], r["value"], partition) for r in batch]
    assert [CODEC.decode(r["value"])["value"] for r in batch] == list(row.quantities.values())


def test_records_of_the_real_sample_are_the_codecs_bytes() -> None:
    lines = [line for line in SAMPLE.read_bytes().splitlines() if line.strip()]
    assert len(lines) > 4000
    for line in lines:
        row = parse_row(line)
        assert SPLITTER.batch(row) == reference(row)
