"""Which records of one key's batch count, and why the others do not (rules 1-3 of
:mod:`windowing.windows`): future, late, duplicate, a copy that supersedes the held one, or counted.

Future and late are prefix maxima over the batch, so numpy decides them for all records at
once. Copies are the only per-record part: a copy is judged against the copy held *before* it,
so they are walked in arrival order. But a record's verdict depends only on the other copies
of the same record, and copies are rare (re-sends after a restart, corrections): a record that
meets no other copy of itself, in the batch or in the state, counts iff it is neither future
nor late. :func:`classify` decides those with numpy and walks only the records that meet a
copy; :func:`classify_each` walks every record, the rule as written and the reference.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from operators.reasons import BEHIND_WATERMARK, DUPLICATE, FUTURE_TIMESTAMP, WINDOW_CLOSED
from operators.time import NO_TIME

if TYPE_CHECKING:  # windows.py imports this module: the types only, for the hints
    from windowing.windows import WindowRules, WindowState


@dataclass(frozen=True)
class Running:
    """The key's clock and horizon before a batch (position 0) and after each of its records
    (position i + 1), in arrival order. Both never decrease; kept so that a window closed in the
    batch can name the record that made it closable, whatever the batch cuts were."""

    clocks: np.ndarray
    horizons: np.ndarray

    @property
    def clock_ms(self) -> int:
        return int(self.clocks[-1])

    @property
    def horizon_ms(self) -> int:
        return int(self.horizons[-1])

    def clock_reaching(self, closes: np.ndarray) -> list[int]:
        """For closing times in (first horizon, last horizon]: the clock at the first record whose
        horizon reached each. One binary search, since the horizons never decrease."""
        return self.clocks[np.searchsorted(self.horizons, closes, "left")].tolist()


@dataclass
class Verdicts:
    """One batch judged; indices are positions in the batch as given."""

    running: Running  # the key's clocks and horizons through the batch
    counted: np.ndarray  # records that count, ascending
    aside: list[
        tuple[int, str, int]
    ]  # (index, reason, horizon it was compared with), in index order
    superseded: list[tuple[int, float, str, int]] = field(
        default_factory=list
    )  # held copies replaced:
    # (time, value, row id, horizon the replacing copy was compared with), in the order replaced
    dropped: list[int] = field(
        default_factory=list
    )  # positions in the state of the replaced held copies
    walked: int = 0  # records classified one by one (the others by numpy)

    @property
    def clock_ms(self) -> int:
        """The key's clock after the batch."""
        return self.running.clock_ms

    @property
    def horizon_ms(self) -> int:
        """And its horizon."""
        return self.running.horizon_ms


@dataclass
class _Judged:
    """What numpy decides for every record at once: the clocks and who is future or late."""

    future: np.ndarray
    late: np.ndarray
    behind_clock: (
        np.ndarray
    )  # of the late: behind clock - lateness (else only behind a flushed window)
    before: np.ndarray  # the horizon before each record
    running: Running

    def aside(self, at: np.ndarray) -> list[tuple[int, str, int]]:
        """(index, reason, horizon) of future or late records ``at``."""
        reasons = [
            FUTURE_TIMESTAMP if f else BEHIND_WATERMARK if b else WINDOW_CLOSED
            for f, b in zip(self.future[at].tolist(), self.behind_clock[at].tolist(), strict=False)
        ]
        return list(zip(at.tolist(), reasons, self.before[at].tolist(), strict=False))


def classify(
    rules: WindowRules,
    state: WindowState,
    times: np.ndarray,
    values: np.ndarray,
    row_ids: list[str],
    now_ms: int | None,
) -> Verdicts:
    """Numpy for the records that meet no copy of themselves, one by one for the others."""
    judged = _judge(rules, state, times, now_ms)
    set_aside = judged.future | judged.late
    candidates = np.flatnonzero(~set_aside)
    meets = _meeting(rules.same_by_row_id, state, times, row_ids, candidates)
    aside = judged.aside(np.flatnonzero(set_aside))
    if not meets.any():
        return Verdicts(judged.running, candidates, aside)
    walk = candidates[meets]
    held_at = _held_at(state.times, times[walk])
    walked = _walk(rules, state, times, values, row_ids, judged, walk.tolist(), held_at)
    counts = np.zeros(len(times), bool)
    counts[candidates[~meets]] = counts[walked.counted] = True
    return Verdicts(
        judged.running,
        np.flatnonzero(counts),
        sorted(aside + walked.aside),
        walked.superseded,
        walked.dropped,
        walked.walked,
    )


def classify_each(
    rules: WindowRules,
    state: WindowState,
    times: np.ndarray,
    values: np.ndarray,
    row_ids: list[str],
    now_ms: int | None,
) -> Verdicts:
    """Every record in arrival order: the rule as written, the reference for :func:`classify`."""
    return _walk(
        rules,
        state,
        times,
        values,
        row_ids,
        _judge(rules, state, times, now_ms),
        range(len(times)),
        range(len(state.times)),
    )


def _judge(
    rules: WindowRules, state: WindowState, times: np.ndarray, now_ms: int | None
) -> _Judged:
    n = len(times)
    future = np.zeros(n, bool)
    if rules.max_future_ms is not None and now_ms is not None:
        future = times > now_ms + rules.max_future_ms
    clocks = np.maximum.accumulate(
        np.concatenate([[state.clock_ms], np.where(future, NO_TIME, times)])
    )
    pushes = np.where(future, NO_TIME, _minus(times, rules.allowed_lateness_ms))
    horizons = np.maximum.accumulate(np.concatenate([[state.horizon_ms], pushes]))
    before = horizons[:-1]
    late = ~future & (times < before)
    behind_clock = times < _minus(clocks[:-1], rules.allowed_lateness_ms)
    return _Judged(future, late, behind_clock, before, Running(clocks, horizons))


def _minus(times: np.ndarray, amount: int) -> np.ndarray:
    """times - amount, with "never" staying "never" (no wrap-around)."""
    return np.where(times == NO_TIME, NO_TIME, times - amount)


def _meeting(
    by_row_id: bool, state: WindowState, times: np.ndarray, row_ids: list[str], at: np.ndarray
) -> np.ndarray:
    """Which of the records ``at`` are the same record as another of them or a held one. Equal
    times decide it, except by row id: then the (time, row id) of the records of shared times."""
    mine = times[at]
    order = np.argsort(mine, kind="stable")
    ordered = mine[order]
    equal = ordered[1:] == ordered[:-1]
    shared = np.zeros(len(mine), bool)
    shared[order] = np.concatenate([[False], equal]) | np.concatenate([equal, [False]])
    shared |= _held_at_all(state.times, mine)
    if not by_row_id or not shared.any():
        return shared
    some = np.flatnonzero(shared)
    keys = list(zip(mine[some].tolist(), [row_ids[i] for i in at[some].tolist()], strict=False))
    held = _held_at(state.times, mine[some])
    copies = Counter(keys)
    copies.update(
        zip(state.times[held].tolist(), [state.row_ids[k] for k in held], strict=False)
    )  # one copy each at most
    shared[some] = [copies[key] > 1 for key in keys]
    return shared


def _held_at_all(held: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Which ``times`` a held record has. The held times are sorted (WindowState keeps its records
    by time), so a binary search each: the state may be far larger than the batch."""
    at = np.searchsorted(held, times)
    return held[np.minimum(at, len(held) - 1)] == times if len(held) else np.zeros(len(times), bool)


def _held_at(held: np.ndarray, times: np.ndarray) -> list[int]:
    """Positions of the held records at any of ``times``."""
    wanted = np.unique(times)
    lows, highs = np.searchsorted(held, wanted, "left"), np.searchsorted(held, wanted, "right")
    return [
        k
        for low, high in zip(lows.tolist(), highs.tolist(), strict=False)
        for k in range(low, high)
    ]


def _walk(
    rules: WindowRules,
    state: WindowState,
    times: np.ndarray,
    values: np.ndarray,
    row_ids: list[str],
    judged: _Judged,
    batch_at: Sequence[int],
    held_at: Sequence[int],
) -> Verdicts:
    """The records ``batch_at`` one by one in arrival order, against the held records ``held_at``
    and each other (all of them, or at least every copy of each record walked)."""
    future, late, behind_clock, before = (
        judged.future,
        judged.late,
        judged.behind_clock,
        judged.before,
    )
    identity = (lambda t, row_id: (t, row_id)) if rules.same_by_row_id else (lambda t, row_id: t)
    held_before = {identity(int(state.times[k]), state.row_ids[k]): k for k in held_at}
    dropped: list[int] = []  # state records replaced by a copy in this batch
    held: dict[object, int] = {}  # same record -> batch index of its current copy
    aside: list[tuple[int, str, int]] = []
    superseded: list[tuple[int, float, str, int]] = []
    for i in batch_at:
        if future[i]:
            aside.append((i, FUTURE_TIMESTAMP, int(before[i])))
        elif late[i]:
            aside.append(
                (i, BEHIND_WATERMARK if behind_clock[i] else WINDOW_CLOSED, int(before[i]))
            )
        else:
            same = identity(int(times[i]), row_ids[i])
            if same in held:
                j, from_state = held[same], False
                old = (int(times[j]), float(values[j]), row_ids[j])
            elif same in held_before:
                j, from_state = held_before[same], True
                old = (int(state.times[j]), float(state.values[j]), state.row_ids[j])
            else:
                held[same] = i
                continue
            if old[1:] == (float(values[i]), row_ids[i]):
                aside.append((i, DUPLICATE, int(before[i])))
                continue
            superseded.append((*old, int(before[i])))
            if from_state:
                dropped.append(held_before.pop(same))
            held[same] = i
    counted = np.array(sorted(held.values()), dtype=np.intp)
    return Verdicts(judged.running, counted, aside, superseded, dropped, len(batch_at))
