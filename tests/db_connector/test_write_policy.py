"""When the connector writes: at once when idle and caught up, else by size or age."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from db_connector.batch import write_now


@dataclass
class Pending:
    points: int
    age: float

    def __len__(self) -> int:
        return self.points

    def age_s(self) -> float:
        return self.age


@pytest.mark.parametrize(
    "pending, writing, caught_up, expected",
    [
        (Pending(0, 9.0), False, True, False),  # nothing to write
        (Pending(5, 0.0), False, True, True),  # idle and caught up: at once
        (Pending(5, 0.0), True, True, False),  # a write in flight: gather
        (Pending(5, 0.0), False, False, False),  # more is coming right now: gather
        (Pending(5, 0.25), True, False, True),  # waited the interval
        (Pending(100, 0.0), True, False, True),  # a full batch
    ],
)
def test_write_now(pending: Pending, writing: bool, caught_up: bool, expected: bool) -> None:
    assert (
        write_now(pending, writing=writing, caught_up=caught_up, batch_points=100, flush_s=0.25)
        is expected
    )
