"""The soak replay's fleet: what it must contain for the replay to show anything (machines that
leave, renamed quantities, a flood of names), in event-time order and the same for a seed."""

from __future__ import annotations

import itertools
from collections import defaultdict
from datetime import timedelta

from benchmarks.support.churn import FIRMWARE_QUANTITY, HOSTILE_QUANTITY, Churn, churn_rows
from streamkit.identifiers import is_quantity, is_thing

START_MS = 1_700_000_000_000
DAY_MS = 86_400_000
FLEET = Churn(span=timedelta(days=6), machines=8, step=timedelta(minutes=5))


def test_the_fleet_joins_leaves_renames_and_floods_in_event_time_order() -> None:
    rows = list(churn_rows(FLEET, START_MS))
    assert rows == list(churn_rows(FLEET, START_MS))  # a function of the seed
    times = [row["Timestamp"] for row in rows]
    assert times == sorted(times) and START_MS <= times[0] and times[-1] < START_MS + 6 * DAY_MS
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    names: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        thing = row["Thing"]
        first.setdefault(thing, row["Timestamp"])
        last[thing] = row["Timestamp"]
        names[thing].update(key for key in row if key not in ("Thing", "Timestamp"))
    assert len(first) == 8
    assert any(t > START_MS + DAY_MS for t in first.values()), "nobody joined later"
    assert any(t < START_MS + 5 * DAY_MS for t in last.values()), "nobody left"
    hostile = [row for row in rows if row["Thing"] == "M0000"]
    assert all(any(k.startswith(HOSTILE_QUANTITY) for k in row) for row in hostile)
    assert len({k for k in names["M0000"] if k.startswith(HOSTILE_QUANTITY)}) == len(hostile)
    renamed = [t for t, n in names.items() if sum(k.startswith(FIRMWARE_QUANTITY) for k in n) > 1]
    assert len(renamed) >= 4, "firmware renames a quantity now and then"
    assert all(is_thing(t) and all(is_quantity(n) for n in names[t]) for t in names)


def test_a_machine_is_never_heard_of_after_it_left() -> None:
    rows = list(churn_rows(FLEET, START_MS))
    by_thing = {
        thing: [row["Timestamp"] for row in group]
        for thing, group in itertools.groupby(
            sorted(rows, key=lambda r: (r["Thing"], r["Timestamp"])), key=lambda r: r["Thing"]
        )
    }
    step_ms = 5 * 60_000
    for thing, stamps in by_thing.items():
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        assert max(gaps) <= step_ms + 1000, f"{thing} paused instead of leaving for good"
