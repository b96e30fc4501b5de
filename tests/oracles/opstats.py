"""A brute-force reference of the operation statistics (docs/operation-statistics.md), written
from the definitions without the opstats library (nor anything else of the project).

Per thing and component: which records count is decided one record at a time in arrival order
(an input's records in their own order; non-finite values, copies, records behind the partner
timeout and records whose power is a fault are handed back); the power signal is then
evaluated on every elementary interval between consecutive breakpoints (record times, ends of
holds, cycle boundaries) by looking up each input's latest record, and each cycle's figures are
summed with exact fractions.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction

#: thing, quantity, event time ms, value, row id: one record as the pipeline reads it
Record = tuple[str, str, int, float, str]

#: rated power W, band edges in % (0 .. 100), physical bound as a factor of the rated power
RatingOf = Callable[[str, str], tuple[float, tuple[float, ...], float]]


@dataclass(frozen=True)
class Definition:
    left: tuple[str, str]  #: prefix and suffix around the component, e.g. ("actSpeed_", "")
    right: tuple[str, str]
    power: Callable[[float, float], float]
    rating: RatingOf
    cycle_ms: int
    hold_ms: int
    partner_timeout_ms: int | None
    #: the duty rating in % per (thing, component), and the overload time
    duty_rating: Callable[[str, str], float] = lambda thing, component: 40.0
    overload_after_ms: int = 60_000


@dataclass
class Cycle:
    band_ms: list[int]
    data_ms: int
    motoring: Fraction  # W*ms
    regenerative: Fraction
    peak_w: float


def _component(quantity: str, around: tuple[str, str]) -> str | None:
    prefix, suffix = around
    if (
        len(quantity) > len(prefix) + len(suffix)
        and quantity.startswith(prefix)
        and quantity.endswith(suffix)
    ):
        return quantity[len(prefix) : len(quantity) - len(suffix)]
    return None


def _side(quantity: str, d: Definition) -> tuple[str, int] | None:
    for side, around in enumerate((d.left, d.right)):
        component = _component(quantity, around)
        if component is not None:
            return component, side
    return None


def _band(magnitude: float, rated_w: float, edges_pct: tuple[float, ...]) -> int:
    """The band of |P|: [edge k, edge k+1), the top one closed, above rated the overload band."""
    edges_w = [rated_w * e / 100.0 for e in edges_pct]
    if magnitude > edges_w[-1]:
        return len(edges_w) - 1
    for k in range(len(edges_w) - 2, -1, -1):
        if magnitude >= edges_w[k]:
            return k
    return 0


def expected(records: Iterable[Record], d: Definition) -> tuple[dict, list]:
    """(cycles, late): cycles as {(thing, component, cycle start): figures}, late records as
    (thing, quantity, event time, value, row id, reason)."""
    by_key: dict[tuple[str, str], list[tuple[int, int, float, str]]] = {}
    for thing, quantity, t, v, row_id in records:
        found = _side(quantity, d)
        if found is not None:
            by_key.setdefault((thing, found[0]), []).append((found[1], t, v, row_id))
    cycles: dict = {}
    late: list = []
    for (thing, component), arrivals in sorted(by_key.items()):
        names = [f"{a}{component}{b}" for a, b in (d.left, d.right)]
        taken = _taken(arrivals, d, late, thing, names)
        good = _without_faults(taken, d, thing, component, late, names)
        cycles.update(_cycles(good, d, thing, component))
    return cycles, late


def _taken(arrivals, d: Definition, late: list, thing: str, names: list[str]) -> list:
    """The records each input takes, in arrival order."""
    last: list[tuple[int, float] | None] = [None, None]  # each input's newest taken record
    taken = []
    for side, t, v, row_id in arrivals:
        reason = None
        if not math.isfinite(v):
            reason = "invalid_value"
        elif (mine := last[side]) is not None and t <= mine[0]:
            reason = "duplicate" if (t, v) == mine else "behind_watermark"
        else:
            times = [x[0] for x in last if x is not None]
            if d.partner_timeout_ms is not None and times:
                horizon = max(times) - d.partner_timeout_ms
                if len(times) == 2:
                    horizon = max(horizon, min(times))
                if t <= horizon:
                    reason = "partner_timeout"
            elif len(times) == 2 and t <= min(times):
                reason = "partner_timeout"  # cannot happen: each input is newer than its last
        if reason:
            late.append((thing, names[side], t, v, row_id, reason))
            continue
        last[side] = (t, v)
        taken.append((side, t, v, row_id))
    return taken


def _without_faults(taken, d: Definition, thing, component, late: list, names) -> list[list]:
    """Each input's records in time order, without those whose power at their instant (both
    inputs holding) is not finite or beyond the bound: they are handed back together."""
    rated, _, bound = d.rating(thing, component)
    good: list[list[tuple[int, float]]] = [[], []]
    for t in sorted({x[1] for x in taken}):
        now = [x for x in taken if x[1] == t]
        values = []
        for side in (0, 1):
            mine = [x for x in now if x[0] == side]
            if mine:
                values.append(mine[0][2])
            elif good[side] and t - good[side][-1][0] < d.hold_ms:
                values.append(good[side][-1][1])
            else:
                values.append(None)
        if None not in values:
            p = d.power(values[0], values[1])
            if not math.isfinite(p) or abs(p) > rated * bound:
                reason = "invalid_value" if not math.isfinite(p) else "beyond_physical_bound"
                late.extend((thing, names[s], t, v, row_id, reason) for s, _, v, row_id in now)
                continue
        for side, _, v, _ in now:
            good[side].append((t, v))
    return good


def _value_at(
    series: list[tuple[int, float]], times: list[int], at: int, hold_ms: int
) -> float | None:
    k = bisect.bisect_right(times, at) - 1
    if k < 0 or at - series[k][0] >= hold_ms:
        return None
    return series[k][1]


def _cycles(good: list[list], d: Definition, thing: str, component: str) -> dict:
    rated, edges, _ = d.rating(thing, component)
    points = {t for series in good for t, _ in series}
    points |= {t + d.hold_ms for t in set(points)}
    if not points:
        return {}
    first, last = min(points), max(points)
    start = (first // d.cycle_ms) * d.cycle_ms
    points |= set(range(start, last + d.cycle_ms, d.cycle_ms))
    ordered = sorted(points)
    open_cycles: dict[int, Cycle] = {}
    times = [[t for t, _ in series] for series in good]
    for a, b in zip(ordered, ordered[1:], strict=False):
        left, right = (_value_at(good[s], times[s], a, d.hold_ms) for s in (0, 1))
        if left is None or right is None:
            continue
        p = d.power(left, right)
        c = open_cycles.setdefault(
            (a // d.cycle_ms) * d.cycle_ms,
            Cycle([0] * len(edges), 0, Fraction(0), Fraction(0), 0.0),
        )
        c.band_ms[_band(abs(p), rated, edges)] += b - a
        c.data_ms += b - a
        if p >= 0:
            c.motoring += Fraction(p) * (b - a)
        else:
            c.regenerative += Fraction(-p) * (b - a)
        c.peak_w = max(c.peak_w, abs(p))
    out = {}
    cumulative = [0] * len(edges)
    for cycle_start in sorted(open_cycles):
        c = open_cycles[cycle_start]
        cumulative = [x + y for x, y in zip(cumulative, c.band_ms, strict=True)]
        kwh = Fraction(3_600_000_000)
        out[(thing, component, cycle_start)] = {
            "band_ms": tuple(c.band_ms),
            "data_ms": c.data_ms,
            "no_data_ms": d.cycle_ms - c.data_ms,
            "duty_pct": 100 * Fraction(c.band_ms[-2] + c.band_ms[-1], c.data_ms),
            "motoring_kwh": c.motoring / kwh,
            "regenerative_kwh": c.regenerative / kwh,
            "mean_w": (c.motoring + c.regenerative) / c.data_ms,
            "peak_w": c.peak_w,
            "cumulative_ms": tuple(cumulative),
        }
    return out


def horizons(records: Iterable[Record], d: Definition) -> dict[tuple[str, str], int | None]:
    """Per (thing, component), once every record is in: up to where everything is known (the
    older input's newest time, or the newer one's minus the partner timeout), None: nothing.
    Each input's newest record is taken whatever else it is (later ones are never late)."""
    last: dict[tuple[str, str], dict[int, int]] = {}
    for thing, quantity, t, v, _ in records:
        found = _side(quantity, d)
        if found is not None and math.isfinite(v):
            mine = last.setdefault((thing, found[0]), {})
            mine[found[1]] = max(mine.get(found[1], t), t)
    out: dict[tuple[str, str], int | None] = {}
    for key, newest in last.items():
        horizon = min(newest.values()) if len(newest) == 2 else None
        if d.partner_timeout_ms is not None:
            ahead = max(newest.values()) - d.partner_timeout_ms
            horizon = ahead if horizon is None else max(horizon, ahead)
        out[key] = horizon
    return out


def certain(records: Iterable[Record], d: Definition) -> tuple[dict, list]:
    """What a run that never flushed must have emitted once every record is in: the cycles that
    end at or before their component's horizon, the records handed back on arrival, and the
    faults at or before the horizon."""
    records = list(records)
    cycles, late = expected(records, d)
    reach = horizons(records, d)

    def before(thing: str, component: str, t: int) -> bool:
        horizon = reach.get((thing, component))
        return horizon is not None and t <= horizon

    kept = {k: v for k, v in cycles.items() if before(k[0], k[1], k[2] + d.cycle_ms)}
    handed = []
    for item in late:
        thing, quantity, t, v, _, reason = item
        fault = reason == "beyond_physical_bound" or (
            reason == "invalid_value" and math.isfinite(v)
        )
        found = _side(quantity, d)
        if not fault or (found is not None and before(thing, found[0], t)):
            handed.append(item)
    return kept, handed


def events(cycles: dict, d: Definition) -> list[tuple]:
    """The overload alerts of the cycles (docs/operation-statistics.md): per thing and
    component in cycle order, a cycle is overloaded when its duty cycle (a double) is above the
    duty rating or its time over the rated power is longer than the overload time; the first
    overloaded cycle fires, the first one back under resolves. Each as (thing, component,
    status, start of the firing cycle, this cycle's start, why)."""
    out = []
    firing: dict[tuple[str, str], int] = {}
    for thing, component, start in sorted(cycles):
        c = cycles[thing, component, start]
        top = c["band_ms"][-2] + c["band_ms"][-1]
        why = []
        if 100.0 * top / c["data_ms"] > d.duty_rating(thing, component):
            why.append("duty")
        if c["band_ms"][-1] > d.overload_after_ms:
            why.append("overload")
        key = (thing, component)
        if why and key not in firing:
            firing[key] = start
            out.append((thing, component, "firing", start, start, "+".join(why)))
        elif not why and key in firing:
            out.append((thing, component, "resolved", firing.pop(key), start, ""))
    return out
