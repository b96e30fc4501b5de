"""Writes the golden snapshots of tests/operators/golden with this release's encoder:

    .venv/bin/python -m tests.operators.make_golden

Run it only when the state encoding's VERSION is raised, for the new version's files; the
files of older versions stay as they are, since a release must still read them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from operators import VERSION, KeyedOperator, Records

from .scenarios import (
    NOW_MS,
    RECORDS,
    STATS_RECORDS,
    join_operator,
    opstats_operator,
    thing_operator,
    window_operator,
)

GOLDEN = Path(__file__).parent / "golden"


def golden_snapshots() -> dict[str, bytes]:
    """Each operator's state after the first seven records of RECORDS, then the rest."""
    out = {}
    cases: list[tuple[str, KeyedOperator[Any, Any], Records]] = [
        ("join", join_operator(), RECORDS),
        ("windows", window_operator(), RECORDS.take(RECORDS.quantity == "speed")),
        ("thing", thing_operator(), RECORDS),
        ("opstats", opstats_operator(), STATS_RECORDS),
    ]
    for name, operator, records in cases:
        state, _ = operator.process(operator.initial(), records.take(slice(0, 7)), NOW_MS)
        state, _ = operator.process(state, records.take(slice(7, None)), NOW_MS + 500)
        out[f"{name}-v{VERSION}.bin"] = operator.snapshot(state)
    return out


if __name__ == "__main__":
    for file, data in golden_snapshots().items():
        (GOLDEN / file).write_bytes(data)
        print(GOLDEN / file, len(data), "bytes")
