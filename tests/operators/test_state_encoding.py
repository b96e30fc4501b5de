"""The one state encoding: a checkpoint written by one release is read by the next.

The golden files were written by the encoder of their version (``make_golden``) and are never
rewritten: every later release must read them to the same state. A snapshot of a newer version
is refused with a clear error instead of being misread.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from operators import (
    VERSION,
    KeyedOperator,
    Reader,
    StateFormatError,
    StateVersionError,
    Together,
    Writer,
)

from .make_golden import GOLDEN, golden_snapshots
from .scenarios import join_operator, opstats_operator, thing_operator, window_operator

OPERATORS: dict[str, Callable[[], KeyedOperator[Any, Any]]] = {
    "join": join_operator,
    "windows": window_operator,
    "thing": thing_operator,
    "opstats": opstats_operator,
}


def golden(name: str, version: int = 1) -> bytes:
    return (GOLDEN / f"{name}-v{version}.bin").read_bytes()


def test_every_golden_file_is_read_and_written_back_bit_for_bit() -> None:
    files = sorted(p.name for p in Path(GOLDEN).glob("*.bin"))
    assert files == sorted(f"{name}-v{v}.bin" for name in OPERATORS for v in range(1, VERSION + 1))
    for name, make in OPERATORS.items():
        operator = make()
        for version in range(1, VERSION + 1):
            state = operator.restore(golden(name, version))
            assert operator.snapshot(state) == golden(name, VERSION)


def test_the_encoder_still_writes_the_golden_snapshots_of_this_version() -> None:
    assert golden_snapshots() == {
        f"{name}-v{VERSION}.bin": golden(name, VERSION) for name in OPERATORS
    }


def test_the_version_1_snapshots_hold_the_states_they_were_made_from() -> None:
    """What the files say, independently of the encoder: the fields of each state."""
    join = join_operator().restore(golden("join"))
    speed, torque = join.quantities
    # speed: 6 and its changed copy held by the reorder stage (3 ms), 33 (inf) handed back
    assert (speed.last, speed.max_seen, speed.held) == (1, 6, [(4, 0.5), (6, 3.5)])
    assert (torque.last, torque.max_seen, torque.held) == (9, 30, [(30, 2.0)])
    pair = join.pairs[0]
    assert (pair.left.times, pair.left.values) == ([1], [1.0])
    assert (pair.right.times, pair.right.values) == ([2, 9], [2.5, -1.0])
    windows = window_operator().restore(golden("windows"))
    assert (windows.clock_ms, windows.horizon_ms) == (33, 28)
    assert windows.times.tolist() == [33] and windows.row_ids == ["s33"]
    assert np.isinf(windows.values).tolist() == [True]
    assert (windows.last_batch_ms, windows.deadline_ms) == (
        1_700_000_000_500,
        1_700_000_001_500,
    )
    thing = thing_operator()
    state = thing.restore(golden("thing"))
    assert sorted(state[1]) == ["speed", "temp", "torque"]
    temp = state[1]["temp"]
    assert (temp.clock_ms, temp.horizon_ms, temp.times.tolist()) == (12, 7, [3, 12])
    assert temp.row_ids == ["c3", "c12\u00e9"] and temp.values.tolist() == [20.0, 21.0]
    assert thing.deadline(state) == 1_700_000_001_500


def test_an_operator_that_gained_parts_goes_on_from_its_checkpoint() -> None:
    """The join job's state once the statistics run beside it, and the single pass's once they
    run in Spark's state store: what the snapshot holds comes back, the new part starts
    initial; a part that vanished is refused (its state would be lost)."""
    join = join_operator()
    with_stats = Together(("join", join, None), ("opstats", opstats_operator(), None))
    state = with_stats.restore(golden("join", 3))
    assert join.snapshot(state[0]) == golden("join", 3)
    assert opstats_operator().snapshot(state[1]) == opstats_operator().snapshot(
        opstats_operator().initial()
    )
    thing = thing_operator()
    grown = Together(*thing.parts, ("opstats", opstats_operator(), None))
    state = grown.restore(golden("thing", 3))
    assert thing.snapshot(state[:2]) == golden("thing", 3)
    assert grown.deadline(state) == thing.deadline(thing.restore(golden("thing", 3)))
    shrunk = Together(thing.parts[0])
    with pytest.raises(StateFormatError, match="where \\['join'\\] were expected"):
        shrunk.restore(golden("thing", 3))
    renamed = Together(("joined", join, None), *thing.parts[1:])
    with pytest.raises(StateFormatError, match="were expected"):
        renamed.restore(golden("thing", 3))


def test_a_snapshot_of_a_newer_version_is_refused_with_a_clear_error() -> None:
    newer = bytearray(golden("join"))
    newer[3] = VERSION + 1
    with pytest.raises(StateVersionError, match=f"version {VERSION + 1} is not readable"):
        join_operator().restore(bytes(newer))
    newer[3] = 0
    with pytest.raises(StateVersionError):
        join_operator().restore(bytes(newer))


def test_bytes_that_are_no_snapshot_of_the_operator_are_refused() -> None:
    with pytest.raises(StateFormatError, match="'join' state snapshot where a 'windows'"):
        window_operator().restore(golden("join"))
    with pytest.raises(StateFormatError, match="cut short"):
        join_operator().restore(golden("join")[:-3])
    with pytest.raises(StateFormatError, match="unread bytes"):
        join_operator().restore(golden("join") + b"\0")
    with pytest.raises(StateFormatError, match="not a keyed-operator state"):
        join_operator().restore(b"LSB\x01" + bytes(12))


def test_fields_come_back_as_written() -> None:
    out = Writer("test")
    out.int64(-(2**63))
    out.optional_int64(None)
    out.optional_int64(2**63 - 1)
    out.texts(["", "a", "\u00e9\u4e2d", "x" * 300])
    out.texts(["plain", "ascii"])
    out.texts([])
    out.ints(np.array([3, -1], dtype=np.int32))
    out.floats([float("nan"), -0.0])
    out.blob(b"\0\1")
    data = Reader(out.finish(), "test")
    assert (data.int64(), data.optional_int64(), data.optional_int64()) == (
        -(2**63),
        None,
        2**63 - 1,
    )
    assert data.texts() == ["", "a", "\u00e9\u4e2d", "x" * 300]
    assert data.texts() == ["plain", "ascii"] and data.texts() == []
    ints = data.ints()
    assert ints.dtype == np.int64 and ints.tolist() == [3, -1]
    assert [v.hex() for v in data.floats().tolist()] == [float("nan").hex(), (-0.0).hex()]
    assert data.blob() == b"\0\1"
    data.done()
