"""The operation statistics an events file implies, written from docs/operation-statistics.md
without the pipeline's operator: per thing and component, which records count is decided one
at a time in arrival order (the only sequential part: lateness, copies, the partner timeout,
faults); the power signal is then evaluated with numpy on every elementary interval between
record times and ends of holds, cut at the cycle boundaries, and summed per cycle.

A cycle is certain once the horizon (the older input's newest time, or the newer one's minus
the partner timeout) reached its end; a later one is ``pending``: an idle flush may have
emitted it, as if the inputs had ended, and then it must be equal. The same goes for a fault
handed back beyond the horizon.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stacktools.verify.ratings import Rated
from stacktools.verify.rules import StatsRules

NS_PER_MS = 1_000_000
MS_PER_HOUR = 3_600_000.0
WMS_PER_KWH = 3_600_000_000.0
STAGE = "opstats"


@dataclass
class Handed:
    """Records of one component handed back: (side, time, value, reason, certain)."""

    side: list[int]
    time_ms: list[int]
    value: list[float]
    reason: list[str]
    certain: list[bool]

    @classmethod
    def empty(cls) -> Handed:
        return cls([], [], [], [], [])

    def add(self, side: int, t: int, v: float, reason: str, certain: bool = True) -> None:
        self.side.append(side)
        self.time_ms.append(t)
        self.value.append(v)
        self.reason.append(reason)
        self.certain.append(certain)


@dataclass
class Cycles:
    """One component's cycles with data, in time order."""

    start_ms: np.ndarray
    band_ms: np.ndarray  # (cycles, bands)
    data_ms: np.ndarray
    motoring_wms: np.ndarray
    regenerative_wms: np.ndarray
    peak_w: np.ndarray
    pending: np.ndarray

    @property
    def duty_pct(self) -> np.ndarray:
        """The relative duty factor: the top band and over / the time with data, in %."""
        top = self.band_ms[:, -2] + self.band_ms[:, -1]
        return 100.0 * top / self.data_ms.astype(np.float64)


def accepted(
    sides: np.ndarray, times: np.ndarray, values: np.ndarray, rules: StatsRules, late: Handed
) -> tuple[list[list[int]], list[list[float]], int | None]:
    """Each input's records in arrival order, taken or handed back; returns each input's taken
    (times, values) and the final horizon (None: nothing is certain)."""
    last_t: list[int | None] = [None, None]
    last_v = [math.nan, math.nan]
    taken_t: list[list[int]] = [[], []]
    taken_v: list[list[float]] = [[], []]
    timeout = rules.partner_timeout_ms
    for side, t, v in zip(sides.tolist(), times.tolist(), values.tolist(), strict=True):
        if not math.isfinite(v):
            late.add(side, t, v, "invalid_value")
            continue
        mine = last_t[side]
        if mine is not None and t <= mine:
            late.add(
                side, t, v, "duplicate" if (t == mine and v == last_v[side]) else "behind_watermark"
            )
            continue
        horizon = _horizon(last_t, timeout)
        if horizon is not None and t <= horizon:
            late.add(side, t, v, "partner_timeout")
            continue
        last_t[side], last_v[side] = t, v
        taken_t[side].append(t)
        taken_v[side].append(v)
    return taken_t, taken_v, _horizon(last_t, timeout)


def _horizon(last: list[int | None], timeout: int | None) -> int | None:
    known = [t for t in last if t is not None]
    horizon = min(known) if len(known) == 2 else None
    if timeout is not None and known:
        ahead = max(known) - timeout
        horizon = ahead if horizon is None else max(horizon, ahead)
    return horizon


def without_faults(
    taken_t: list[list[int]],
    taken_v: list[list[float]],
    power: Callable[[float, float], float],
    bound_w: float,
    hold_ms: int,
    horizon: int | None,
    late: Handed,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The records whose power, with the other input's held value, is a load: a power that is
    not finite or beyond the bound hands back the records of that instant, and the inputs keep
    their previous values."""
    good_t: list[list[int]] = [[], []]
    good_v: list[list[float]] = [[], []]
    at = [0, 0]
    instants = sorted(set(taken_t[0]) | set(taken_t[1]))
    for t in instants:
        now: list[tuple[int, float]] = []
        held: list[float | None] = [None, None]
        for side in (0, 1):
            k = at[side]
            if k < len(taken_t[side]) and taken_t[side][k] == t:
                now.append((side, taken_v[side][k]))
                held[side] = taken_v[side][k]
                at[side] = k + 1
            elif good_t[side] and t - good_t[side][-1] < hold_ms:
                held[side] = good_v[side][-1]
        if held[0] is not None and held[1] is not None:
            p = power(held[0], held[1])
            if not math.isfinite(p) or abs(p) > bound_w:
                reason = "invalid_value" if not math.isfinite(p) else "beyond_physical_bound"
                certain = horizon is not None and t <= horizon
                for side, v in now:
                    late.add(side, t, v, reason, certain)
                continue
        for side, v in now:
            good_t[side].append(t)
            good_v[side].append(v)
    return (
        [np.asarray(x, dtype=np.int64) for x in good_t],
        [np.asarray(x, dtype=np.float64) for x in good_v],
    )


def _held(times: np.ndarray, values: np.ndarray, at: np.ndarray, hold_ms: int) -> np.ndarray:
    """Each input's value at ``at``: its latest record's, for less than the hold; else NaN."""
    if not len(times):
        return np.full(len(at), np.nan)
    k = np.searchsorted(times, at, side="right") - 1
    ok = (k >= 0) & (at - times[np.maximum(k, 0)] < hold_ms)
    return np.where(ok, values[np.maximum(k, 0)], np.nan)


def band_of(magnitude: np.ndarray, rated: Rated) -> np.ndarray:
    """Band k is [edge k, edge k+1) of |P|, the top band closed at P_N, above it the overload
    band (the last index)."""
    edges = np.array([rated.rated_w * pct / 100.0 for pct in rated.bands_pct])
    inner = np.searchsorted(edges[1:-1], magnitude, side="right")
    return np.where(magnitude > edges[-1], len(edges) - 1, inner)


def cycles(
    good_t: list[np.ndarray],
    good_v: list[np.ndarray],
    power: Callable[[np.ndarray, np.ndarray], np.ndarray],
    rated: Rated,
    rules: StatsRules,
    horizon: int | None,
) -> Cycles:
    """The signal's pieces summed per reference cycle."""
    hold, length = rules.hold_ms, rules.cycle_ms
    bands = len(rated.bands_pct)
    points = np.unique(np.concatenate([*good_t, *(t + hold for t in good_t)]))
    if len(points) < 2:
        return _no_cycles(bands)
    a, b = points[:-1], points[1:]
    p = power(
        _held(good_t[0], good_v[0], a, hold),
        _held(good_t[1], good_v[1], a, hold),
    )
    with_data = ~np.isnan(p)
    a, b, p = a[with_data], b[with_data], p[with_data]
    # cut at the cycle boundaries: a piece per cycle it touches
    first, last = a // length, (b - 1) // length
    repeat = (last - first + 1).astype(np.int64)
    piece = np.repeat(np.arange(len(a)), repeat)
    cycle = first[piece] + (np.arange(len(piece)) - np.repeat(np.cumsum(repeat) - repeat, repeat))
    start = np.maximum(a[piece], cycle * length)
    end = np.minimum(b[piece], (cycle + 1) * length)
    duration = end - start
    power_w = p[piece]
    starts, index = np.unique(cycle, return_inverse=True)
    n = len(starts)
    band = band_of(np.abs(power_w), rated)
    band_ms = np.bincount(index * bands + band, weights=duration, minlength=n * bands)
    motoring = np.where(power_w >= 0, power_w, 0.0) * duration
    regenerative = np.where(power_w < 0, -power_w, 0.0) * duration
    peak = np.zeros(n)
    np.maximum.at(peak, index, np.abs(power_w))
    cycle_end = (starts + 1) * length
    return Cycles(
        start_ms=starts * length,
        band_ms=band_ms.reshape(n, bands).astype(np.int64),
        data_ms=np.bincount(index, weights=duration, minlength=n).astype(np.int64),
        motoring_wms=np.bincount(index, weights=motoring, minlength=n),
        regenerative_wms=np.bincount(index, weights=regenerative, minlength=n),
        peak_w=peak,
        pending=np.ones(n, bool) if horizon is None else cycle_end > horizon,
    )


def _no_cycles(bands: int) -> Cycles:
    empty = np.zeros(0, np.int64)
    return Cycles(
        empty, np.zeros((0, bands), np.int64), empty, *(np.zeros(0),) * 3, np.zeros(0, bool)
    )
