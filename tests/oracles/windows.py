"""A brute-force reference of the window rules (docs/windows.md), written without the windows
library (nor anything else of the project): one record at a time in each key's arrival order,
windows found by enumeration, statistics with exact arithmetic. Tests compare the library and the
real job with it."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial

#: thing, quantity, event time ms, value, row id: one record as the job reads it
Record = tuple[str, str, int, float, str]


@dataclass(frozen=True)
class Spec:
    kind: str  # tumbling | sliding | session
    size_ms: int
    slide_ms: int

    @property
    def label(self) -> str:
        """The window's name in keys and tags (docs/influxdb-schema.md): the slide only where it
        is not the size by definition."""
        return (
            f"sliding-{self.size_ms}-{self.slide_ms}"
            if self.kind == "sliding"
            else f"{self.kind}-{self.size_ms}"
        )


@dataclass
class Expected:
    windows: dict[tuple, dict]  # (thing, quantity, label, start) -> statistics and closed_at_ms
    aside: dict[tuple, str]  # (thing, quantity, event time, row id, position in its key) -> reason
    #: copies replaced by a later copy of the same record: (thing, quantity, event time, row id,
    #: value)
    superseded: Counter = field(default_factory=Counter)
    #: the late topic's records of this stage (Avro ``LateRecord`` fields), in arrival order
    late_records: list[dict] = field(default_factory=list)

    def aggregate_records(self) -> list[dict]:
        """The aggregates topic's records (Avro ``WindowAggregate`` fields)."""
        return [
            {"thing": thing, "quantity": quantity, **w}
            for (thing, quantity, _, _), w in self.windows.items()
        ]

    def late_topic(self) -> Counter:
        """What the late topic must hold: (thing, quantity, event time, row id, reason)."""
        out = Counter(
            (thing, quantity, t, row_id, reason)
            for (thing, quantity, t, row_id, _), reason in self.aside.items()
        )
        for (thing, quantity, t, row_id, _), n in self.superseded.items():
            out[(thing, quantity, t, row_id, "superseded")] += n
        return out


def starts_containing(t: int, size: int, slide: int) -> list[int]:
    """Every start s, a multiple of the slide, with s <= t < s + size."""
    s = t - t % slide
    out = []
    while s + size > t:
        out.append(s)
        s -= slide
    return out


def statistics_of(values: list[float]) -> dict:
    exact = [Fraction(v) for v in values]
    return {
        "count": len(values),
        "mean": float(sum(exact) / len(exact)),
        "min": min(values),
        "max": max(values),
        "stddev": statistics.stdev(values) if len(values) > 1 else None,
    }


def window_oracle(
    records: Iterable[Record],
    specs: list[Spec],
    lateness_ms: int,
    *,
    flush_after: Iterable[tuple[str, str, int]] = (),
    now_ms: int | None = None,
    max_future_ms: int | None = None,
    same_by_row_id: bool = False,
) -> Expected:
    """``records`` in arrival order (only each key's order matters); ``flush_after``: (thing,
    quantity, n): the key went idle after its n-th record (1-based). The same record: equal
    event time (and row id with ``same_by_row_id``); its last copy on time wins. A window's
    ``closed_at_ms``: the clock at the first record whose horizon reached its closing time; None
    when a flush emitted it before any record did."""
    flushes = set(flush_after)
    by_key: dict[tuple[str, str], list[Record]] = {}
    for record in records:
        by_key.setdefault((record[0], record[1]), []).append(record)
    expected = Expected({}, {})
    for (thing, quantity), mine in by_key.items():
        clock = horizon = None
        # (horizon, clock) after each record that moved the clocks
        reached: list[tuple[int, int]] = []
        segment: dict[object, Record] = {}  # the same record -> its copy that counts
        for position, (_, _, t, value, row_id) in enumerate(mine, 1):
            ident = (thing, quantity, t, row_id, position)
            # A late record of this one's key and time, under the horizon before this record.
            late = partial(_late, expected, thing, quantity, t, horizon)
            if max_future_ms is not None and now_ms is not None and t > now_ms + max_future_ms:
                expected.aside[ident] = "future_timestamp"
            elif horizon is not None and t < horizon:
                behind = clock is not None and t < clock - lateness_ms
                expected.aside[ident] = "behind_watermark" if behind else "window_closed"
            else:
                same = (t, row_id) if same_by_row_id else t
                held = segment.get(same)
                if held is not None and (held[3], held[4]) == (value, row_id):
                    expected.aside[ident] = "duplicate"
                else:
                    if held is not None:
                        expected.superseded[(thing, quantity, t, held[4], held[3])] += 1
                        late(held[3], held[4], "superseded")
                    segment[same] = (thing, quantity, t, value, row_id)
            if ident in expected.aside:
                late(value, row_id, expected.aside[ident])
            if expected.aside.get(ident) != "future_timestamp":
                clock = t if clock is None else max(clock, t)
                horizon = (
                    clock - lateness_ms if horizon is None else max(horizon, clock - lateness_ms)
                )
                reached.append((horizon, clock))
            if (thing, quantity, position) in flushes:
                closed_until = _emit(expected, list(segment.values()), specs, None, reached)
                if closed_until is not None:
                    horizon = closed_until if horizon is None else max(horizon, closed_until)
                segment = {}
        _emit(expected, list(segment.values()), specs, horizon, reached)
    return expected


def _late(
    expected: Expected,
    thing: str,
    quantity: str,
    t: int,
    horizon: int | None,
    value: float,
    row_id: str,
    reason: str,
) -> None:
    expected.late_records.append(
        {
            "thing": thing,
            "quantity": quantity,
            "event_time_ms": t,
            "value": value,
            "row_id": row_id,
            "reason": reason,
            "stage": "aggregate",
            "watermark_ms": horizon,
        }
    )


def closed_at(reached: list[tuple[int, int]], closes: int) -> int | None:
    """The clock at the first record whose horizon reached ``closes``; None if none has yet."""
    return next((clock for horizon, clock in reached if horizon >= closes), None)


def _emit(
    expected: Expected,
    segment: list[Record],
    specs: list[Spec],
    horizon: int | None,
    reached: list[tuple[int, int]],
) -> int | None:
    """Windows of the segment that close by ``horizon`` (None: all of them); returns the latest
    closing time emitted. ``reached``: the key's (horizon, clock) after each record so far."""
    latest = None
    for spec in specs:
        groups: dict[int, list[Record]] = {}
        if spec.kind == "session":
            run: list[Record] = []
            for record in sorted(segment, key=lambda r: (r[2], r[4])):
                if run and record[2] - run[-1][2] >= spec.size_ms:
                    groups[run[0][2]] = run
                    run = []
                run.append(record)
            if run:
                groups[run[0][2]] = run
        else:
            for record in segment:
                for s in starts_containing(record[2], spec.size_ms, spec.slide_ms):
                    groups.setdefault(s, []).append(record)
        for start, members in groups.items():
            if spec.kind == "session":
                end = max(r[2] for r in members)
                closes = end + spec.size_ms
            else:
                end = closes = start + spec.size_ms
            if horizon is None or closes <= horizon:
                thing, quantity = members[0][0], members[0][1]
                expected.windows[(thing, quantity, spec.label, start)] = {
                    "window_kind": spec.kind,
                    "window_size_ms": spec.size_ms,
                    "window_slide_ms": spec.slide_ms,
                    "window_start_ms": start,
                    "window_end_ms": end,
                    **statistics_of([r[3] for r in members]),
                    "closed_at_ms": closed_at(reached, closes),
                }
                latest = closes if latest is None else max(latest, closes)
    return latest
