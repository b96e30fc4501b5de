"""Undecodable input records reach the jobs' state functions as rows without a thing (no Spark:
the GroupState is a stand-in); each function hands them back as dead letters, touching no state."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd

from spark_jobs import dead_letters
from spark_jobs.config import AggregateSettings, JoinSettings
from spark_jobs.passes import join_function, join_plan, window_pass
from spark_jobs.renderers import JOIN_FIELDS
from spark_jobs.renderers import WINDOW_WITH_STAGE as AGGREGATE_FIELDS


class UntouchableState:
    """Any use of the state fails the test: undecodable records have no key to keep state for."""

    def __getattr__(self, name: str) -> None:
        raise AssertionError(f"the state was used ({name}) for undecodable records")


def undecodable(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "thing": [None] * n,
            "quantity": [None] * n,
            "event_time_ms": [None] * n,
            "value": [None] * n,
            "row_id": [None] * n,
            "kafka_partition": [i % 2 for i in range(n)],
            "kafka_offset": [100 + i for i in range(n)],
            "undecodable_key": [b"k%d" % i for i in range(n)],
            "undecodable_value": [b"\xff garbage %d" % i for i in range(n)],
        }
    )


def assert_dead_letters(out: list[pd.DataFrame], fields: list[tuple[str, str]], n: int) -> None:
    frame = pd.concat(out, ignore_index=True)
    assert list(frame.columns) == [name for name, _ in fields]
    assert frame["record_type"].tolist() == [dead_letters.RECORD_TYPE] * n
    assert frame["undecodable_key"].tolist() == [b"k%d" % i for i in range(n)]
    assert frame["undecodable_value"].tolist() == [b"\xff garbage %d" % i for i in range(n)]
    assert frame["source_partition"].tolist() == [i % 2 for i in range(n)]
    assert frame["source_offset"].tolist() == [100 + i for i in range(n)]


def test_the_join_hands_undecodable_records_back_as_dead_letters() -> None:
    plan = join_plan(JoinSettings.from_sources(cli={"pairs": "speed:torque:mechanical_power"}))
    out = list(
        join_function(plan, max_future=timedelta(hours=1))(
            (None,), iter([undecodable(3)]), UntouchableState()
        )
    )
    assert_dead_letters(out, JOIN_FIELDS, 3)


def test_the_windows_hand_undecodable_records_back_as_dead_letters() -> None:
    settings = AggregateSettings.from_sources(environ={})
    function = window_pass(settings)
    frames = [
        undecodable(4).iloc[:2],
        undecodable(4).iloc[2:],
    ]  # Spark may hand a key's rows in parts
    assert_dead_letters(
        list(function((None,), iter(frames), UntouchableState())), AGGREGATE_FIELDS, 4
    )


def test_the_sink_counts_the_dead_letters_it_writes_by_reason() -> None:
    from spark_jobs.eos_sink import produce_all

    class QueueOnce:
        """A producer whose local queue is full at the first try of every record."""

        def __init__(self) -> None:
            self.produced: list[tuple] = []
            self.full = True

        def produce(self, topic: str, **kwargs: object) -> None:
            self.full = not self.full
            if not self.full:
                raise BufferError
            self.produced.append((topic, kwargs.get("headers")))

        def poll(self, _timeout: float) -> None:
            pass

    reason = [("reason", b"undecodable"), ("stage", b"join")]
    rows = [
        ("out", b"k", b"v", 0, None),
        ("dlq", b"k", b"x", 1, reason),
        ("dlq", None, None, 0, reason),
        ("out", b"k", b"v", None, [("trace", b"1")]),
    ]
    producer = QueueOnce()
    assert produce_all(producer, rows) == (4, {"undecodable": 2})  # type: ignore[arg-type]
    assert [topic for topic, _ in producer.produced] == ["out", "dlq", "dlq", "out"]
