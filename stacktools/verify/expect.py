"""What InfluxDB must hold for the records of a file, written from the specification (join:
docs/join.md, windows and late records: docs/windows.md, points: docs/influxdb-schema.md), per
(Thing, quantity) with numpy over each key's records in arrival order.

No code of the pipeline's operators is used: the join is the prev/next definition with its
certainty rule (a stream never ends, so a pair waits until no later record can undo it), the
windows are enumerated from each record's time, the late rule is the running maximum of each
key's event time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from stacktools.verify import opstats as stats
from stacktools.verify.events import Records
from stacktools.verify.points import KEYS, NS_PER_MS, VALUES
from stacktools.verify.ratings import Rated
from stacktools.verify.rules import Pair, Rules, StatsRules, Window

#: Joined points of one millisecond differ by 2 * gap + (right later) ns below this gap.
LONGEST_DISCRIMINATED_GAP_MS = 499_999


def mechanical_power(speed_rpm: np.ndarray, torque_nm: np.ndarray) -> np.ndarray:
    """P = 2 pi / 60 * n [rpm] * M [Nm] (docs/join.md)."""
    return 2.0 * math.pi / 60.0 * speed_rpm * torque_nm


RESULTS = {
    "mechanical_power": mechanical_power,
    "product": lambda left, right: left * right,
    "difference": lambda left, right: left - right,
}


@dataclass
class Expectation:
    """One DataFrame per measurement (columns KEYS + VALUES; the aggregate's ``pending`` marks a
    window the data has not closed yet: an idle timeout may have emitted it, or not), per
    Thing the newest event time of its records, and every late record as set aside, copies of
    one identity included (InfluxDB keeps the last of them, the late topic each)."""

    frames: dict[str, pd.DataFrame]
    newest_ms: dict[str, int] = field(default_factory=dict)
    late_records: pd.DataFrame | None = None


class _Columns:
    """Column lists gathered per key, concatenated once; text columns as categoricals (a
    Thing's name is stored once, not once per record)."""

    def __init__(self, names: list[str], defaults: dict[str, object] | None = None) -> None:
        self.parts: dict[str, list] = {n: [] for n in names}
        self.defaults = defaults or {}

    def add(self, n: int, **columns: object) -> None:
        for name, column in {**self.defaults, **columns}.items():
            if isinstance(column, str):
                self.parts[name].append((column, n))
            else:
                self.parts[name].append(
                    np.broadcast_to(column, (n,)) if np.isscalar(column) else column
                )

    def frame(self) -> pd.DataFrame:
        out = {}
        for name, parts in self.parts.items():
            if parts and isinstance(parts[0], tuple):
                names = sorted({text for text, _ in parts})
                code = {text: i for i, text in enumerate(names)}
                codes = np.repeat([code[text] for text, _ in parts], [n for _, n in parts])
                out[name] = pd.Categorical.from_codes(codes, categories=names)
            elif parts:
                out[name] = np.concatenate(parts)
            else:
                out[name] = np.zeros(0, np.asarray(self.defaults.get(name, 0.0)).dtype)
        return pd.DataFrame(out)


def expectation(records: Records, rules: Rules) -> Expectation:
    """Every point of the four measurements for ``records`` (arrival order)."""
    raw = _Columns(KEYS["raw"] + VALUES["raw"])
    late = _Columns(KEYS["late"] + VALUES["late"] + ["pending"], {"pending": False})
    windows = _Columns(KEYS["aggregate"] + VALUES["aggregate"] + ["pending", "closes_ms"])
    joined = _Columns(KEYS["joined"] + VALUES["joined"] + ["pending"], {"pending": False})
    pairs = rules.joined_pairs(list(records.quantities))
    paired = {q for pair in pairs for q in (pair.left, pair.right)}
    accepted: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
    newest: dict[str, int] = {}
    key = records.thing.astype(np.int64) * max(len(records.quantities), 1) + records.quantity
    order = np.argsort(key, kind="stable")  # each key's records stay in arrival order
    bounds = np.flatnonzero(np.diff(key[order])) + 1
    for idx in np.split(order, bounds) if len(order) else []:
        thing = records.things[records.thing[idx[0]]]
        quantity = records.quantities[records.quantity[idx[0]]]
        t, v, row = records.time_ms[idx], records.value[idx], records.row[idx]
        newest[thing] = max(newest.get(thing, t.max()), int(t.max()))
        _raw(raw, thing, quantity, t, v)
        if quantity in paired:
            accepted[(int(records.thing[idx[0]]), quantity)] = _join_stream(
                late, thing, quantity, t, v
            )
        if rules.windows:
            ids = [records.row_ids[r] for r in row] if _has_copies(t) else []
            _windows(windows, late, thing, quantity, t, v, ids, rules)
    for (thing_code, quantity), _ in list(accepted.items()):
        for pair in pairs:
            if pair.left == quantity and (thing_code, pair.right) in accepted:
                _join(
                    joined,
                    records.things[thing_code],
                    pair,
                    accepted[(thing_code, pair.left)],
                    accepted[(thing_code, pair.right)],
                    rules.max_gap_ms,
                )
    frames = {"raw": raw.frame(), "joined": joined.frame(), "aggregate": windows.frame()}
    if rules.stats is not None:
        frames.update(_stats(records, rules.stats, late))
    late_records = late.frame()
    frames["late"] = _last_copy(late_records, KEYS["late"])
    return Expectation(frames, newest, late_records)


def _last_copy(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Several records on one point: the last written stands."""
    return frame.drop_duplicates(keys, keep="last").reset_index(drop=True)


def _raw(out: _Columns, thing: str, quantity: str, t: np.ndarray, v: np.ndarray) -> None:
    """One point per (thing, quantity, time): the last copy, as InfluxDB keeps it."""
    if _increasing(t):  # the usual replay: nothing to sort or deduplicate
        times, values = t, v
    else:
        times, first_in_reverse = np.unique(t[::-1], return_index=True)
        values = v[::-1][first_in_reverse]
    out.add(
        len(times),
        thing=thing,
        quantity=quantity,
        time_ms=times,
        time_ns=times * NS_PER_MS,
        value=values,
    )


def _increasing(t: np.ndarray) -> bool:
    return bool(len(t) < 2 or (np.diff(t) > 0).all())


def _has_copies(t: np.ndarray) -> bool:
    return not _increasing(t) and len(np.unique(t)) < len(t)


def _join_stream(
    late: _Columns, thing: str, quantity: str, t: np.ndarray, v: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The default late policy: a record not newer than every earlier one of its stream is late.
    Returns the accepted (times, values), strictly increasing."""
    before = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(t)[:-1]))
    ok = t > before
    n = int((~ok).sum())
    if n:
        late.add(
            n,
            thing=thing,
            quantity=quantity,
            stage="join",
            reason="behind_watermark",
            time_ms=t[~ok],
            time_ns=t[~ok] * NS_PER_MS,
            value=v[~ok],
            watermark_ms=np.full(n, np.nan),
            count=np.ones(n),
        )
    return t[ok], v[ok]


def _partners(own: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(index into own, index into other, certain) of every (x, prev(x)) and (x, next(x)):
    certain when no later record can undo it: a next partner always; a prev partner unless x
    is past the other stream's newest record (a later one could still fall between them). The
    uncertain ones are what the join's idle flush emits (the stream as if it had ended)."""
    if not len(own) or not len(other):
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, bool)
    prev = np.searchsorted(other, own, side="right") - 1
    nxt = np.searchsorted(other, own, side="left")
    has_prev = prev >= 0
    prev_certain = ~((other[np.maximum(prev, 0)] < own) & (own > other[-1]))[has_prev]
    has_next = nxt < len(other)
    mine = np.arange(len(own))
    return (
        np.concatenate((mine[has_prev], mine[has_next])),
        np.concatenate((prev[has_prev], nxt[has_next])),
        np.concatenate((prev_certain, np.ones(int(has_next.sum()), bool))),
    )


def _join(
    out: _Columns,
    thing: str,
    pair: Pair,
    left: tuple[np.ndarray, np.ndarray],
    right: tuple[np.ndarray, np.ndarray],
    max_gap_ms: int | None,
) -> None:
    (lt, lv), (rt, rv) = left, right
    li1, ri1, certain1 = _partners(lt, rt)
    ri2, li2, certain2 = _partners(rt, lt)
    width = len(rt) + 1
    codes = np.concatenate((li1, li2)) * width + np.concatenate((ri1, ri2))
    both = np.unique(codes)
    if not len(both):
        return
    # pending: no side's reason for the pair is certain yet
    pending = ~np.isin(both, codes[np.concatenate((certain1, certain2))])
    li, ri = both // width, both % width
    a, b = lt[li], rt[ri]
    if max_gap_ms is not None:
        near = np.abs(a - b) <= max_gap_ms
        li, ri, a, b, pending = li[near], ri[near], a[near], b[near], pending[near]
    gap = np.abs(a - b)
    long_gap = gap > LONGEST_DISCRIMINATED_GAP_MS
    discriminator = np.where(long_gap, 0, 2 * gap + (b > a))
    out.add(
        len(a),
        thing=thing,
        pair=pair.tag,
        left_time_ms=a,
        right_time_ms=b,
        time_ns=np.maximum(a, b) * NS_PER_MS + discriminator,
        result_name=pair.result_name,
        component=pair.component,
        long_gap_ms=np.where(long_gap, (b - a).astype(np.float64), np.nan),
        result=RESULTS[pair.result_name](lv[li], rv[ri]),
        left_value=lv[li],
        right_value=rv[ri],
        pending=pending,
    )


def _windows(
    windows: _Columns,
    late: _Columns,
    thing: str,
    quantity: str,
    t: np.ndarray,
    v: np.ndarray,
    row_ids: list[str],
    rules: Rules,
) -> None:
    """docs/windows.md for one key without an idle flush: the horizon after each record is the
    running maximum minus the lateness; a record below the horizon before it is late; of the
    copies of one time that count, the last wins; a window is emitted once the horizon reaches
    its closing time."""
    clock = np.maximum.accumulate(t)
    horizon = clock - rules.lateness_ms
    before = np.concatenate(([np.iinfo(np.int64).min], horizon[:-1]))
    watermark = np.concatenate(([np.nan], horizon[:-1].astype(np.float64)))
    is_late = t < before
    n = int(is_late.sum())
    if n:
        late.add(
            n,
            thing=thing,
            quantity=quantity,
            stage="aggregate",
            reason="behind_watermark",
            time_ms=t[is_late],
            time_ns=t[is_late] * NS_PER_MS,
            value=v[is_late],
            watermark_ms=watermark[is_late],
            count=np.ones(n),
        )
    counted = np.flatnonzero(~is_late)
    if _increasing(t[counted]):
        times, first = t[counted], np.arange(len(counted))
        copies = np.ones(len(counted), dtype=np.int64)
    else:
        times, first, copies = np.unique(t[counted], return_index=True, return_counts=True)
    values = v[counted][first]
    for k in np.flatnonzero(copies > 1):  # copies of one record: rare, one at a time
        held_value, held_row = None, 0
        for i in counted[t[counted] == times[k]]:
            if held_value is not None:
                same = held_value == v[i] and row_ids[held_row] == row_ids[i]
                late.add(
                    1,
                    thing=thing,
                    quantity=quantity,
                    stage="aggregate",
                    reason="duplicate" if same else "superseded",
                    time_ms=np.array([t[i]]),
                    time_ns=np.array([t[i] * NS_PER_MS]),
                    value=np.array([v[i] if same else held_value]),
                    watermark_ms=watermark[i : i + 1],
                    count=np.ones(1),
                )
            held_value, held_row = v[i], i
        values[k] = held_value
    final_horizon = horizon[-1]
    for window in rules.windows:
        _window_points(
            windows, thing, quantity, times, values, window, final_horizon, horizon, clock
        )


def _window_points(
    out: _Columns,
    thing: str,
    quantity: str,
    times: np.ndarray,
    values: np.ndarray,
    window: Window,
    final_horizon: int,
    horizon: np.ndarray,
    clock: np.ndarray,
) -> None:
    if not len(times):
        return
    if window.kind == "session":
        breaks = np.flatnonzero(np.diff(times) >= window.size_ms) + 1
        member_start = np.split(np.arange(len(times)), breaks)
        group = np.repeat(np.arange(len(member_start)), [len(m) for m in member_start])
        members_v = values
        starts = times[[m[0] for m in member_start]]
        ends = times[[m[-1] for m in member_start]]
        closes = ends + window.size_ms
    else:
        slide, size = window.slide_ms, window.size_ms
        base = times - np.mod(times, slide)
        parts_t, parts_v, parts_s = [], [], []
        for j in range(-(-size // slide)):
            start = base - j * slide
            inside = start + size > times
            parts_t.append(times[inside])
            parts_v.append(values[inside])
            parts_s.append(start[inside])
        all_s = np.concatenate(parts_s)
        order = np.lexsort((np.concatenate(parts_t), all_s))
        members_v = np.concatenate(parts_v)[order]
        all_s = all_s[order]
        first_of_start = np.concatenate(([True], np.diff(all_s) != 0))
        starts, group = all_s[first_of_start], np.cumsum(first_of_start) - 1
        ends = closes = starts + size
    counts = np.bincount(group)
    firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    means = np.add.reduceat(members_v, firsts) / counts
    squares = np.add.reduceat((members_v - means[group]) ** 2, firsts)
    stddev = np.where(counts > 1, np.sqrt(squares / np.maximum(counts - 1, 1)), np.nan)
    reached = np.searchsorted(horizon, closes, side="left")
    closed_at = np.where(
        reached < len(horizon), clock[np.minimum(reached, len(horizon) - 1)], -1
    ).astype(np.float64)
    pending = closes > final_horizon
    closed_at[pending] = np.nan
    out.add(
        len(starts),
        thing=thing,
        quantity=quantity,
        window=window.label,
        start_ms=starts,
        time_ns=starts * NS_PER_MS,
        count=counts,
        mean=means,
        min=np.minimum.reduceat(members_v, firsts),
        max=np.maximum.reduceat(members_v, firsts),
        stddev=stddev,
        window_end_ms=ends,
        duration_ms=(ends - starts).astype(np.float64)
        if window.kind == "session"
        else np.full(len(starts), np.nan),
        closed_at_ms=closed_at,
        pending=pending,
        closes_ms=closes,
    )


def _stats(records: Records, rules: StatsRules, late: _Columns) -> dict[str, pd.DataFrame]:
    """docs/operation-statistics.md per thing and component (stacktools.verify.opstats): the
    cycles, their bands, and the records handed back into ``late``."""
    cycles = _Columns(
        KEYS["opstats"] + VALUES["opstats"] + ["pending", "closes_ms"], {"pending": False}
    )
    bands = _Columns(KEYS["opstats_band"] + VALUES["opstats_band"] + ["pending", "closes_ms"])
    alerts = _Columns(KEYS["overload"] + VALUES["overload"] + ["pending", "closes_ms"])
    inputs = [rules.side(name) for name in records.quantities]
    component_names = sorted({found[0] for found in inputs if found is not None})
    component_code = {name: i for i, name in enumerate(component_names)}
    side_of = np.array([-1 if found is None else found[1] for found in inputs] or [-1])
    component_of = np.array(
        [-1 if found is None else component_code[found[0]] for found in inputs] or [-1]
    )
    rows = np.flatnonzero(side_of[records.quantity] >= 0)
    key = (
        records.thing[rows].astype(np.int64) * max(len(component_names), 1)
        + component_of[records.quantity[rows]]
    )
    order = rows[np.argsort(key, kind="stable")]  # each key's records in arrival order
    bounds = np.flatnonzero(np.diff(np.sort(key, kind="stable"))) + 1
    scalar_power, vector_power = RESULTS[rules.result_name], RESULTS[rules.result_name]
    for idx in np.split(order, bounds) if len(order) else []:
        thing = records.things[records.thing[idx[0]]]
        component = component_names[component_of[records.quantity[idx[0]]]]
        rated = rules.ratings.of(thing, component)
        sides = side_of[records.quantity[idx]]
        handed = stats.Handed.empty()
        taken_t, taken_v, horizon = stats.accepted(
            sides, records.time_ms[idx], records.value[idx], rules, handed
        )
        good_t, good_v = stats.without_faults(
            taken_t,
            taken_v,
            scalar_power,
            rated.rated_w * rated.physical_bound,
            rules.hold_ms,
            horizon,
            handed,
        )
        found = stats.cycles(good_t, good_v, vector_power, rated, rules, horizon)
        _cycle_points(cycles, bands, thing, component, rated, rules, found)
        _alert_points(alerts, (thing, component), rated, rules, found)
        _handed_back(late, thing, component, rules, handed)
    return {"opstats": cycles.frame(), "opstats_band": bands.frame(), "overload": alerts.frame()}


def _handed_back(
    late: _Columns, thing: str, component: str, rules: StatsRules, handed: stats.Handed
) -> None:
    """The records the statistics handed back, as late records of stage ``opstats``."""
    if not handed.time_ms:
        return
    t = np.asarray(handed.time_ms, dtype=np.int64)
    v = np.asarray(handed.value, dtype=np.float64)
    certain = np.asarray(handed.certain, dtype=bool)
    groups = np.asarray(
        [f"{side}:{reason}" for side, reason in zip(handed.side, handed.reason, strict=True)]
    )
    for group in sorted(set(groups.tolist())):
        side, reason = group.split(":", 1)
        mine = groups == group
        n = int(mine.sum())
        late.add(
            n,
            thing=thing,
            quantity=rules.quantity(component, int(side)),
            stage=stats.STAGE,
            reason=reason,
            time_ms=t[mine],
            time_ns=t[mine] * NS_PER_MS,
            value=v[mine],
            watermark_ms=np.full(n, np.nan),
            count=np.ones(n),
            pending=~certain[mine],
        )


def _alert_points(
    out: _Columns, key: tuple[str, str], rated: Rated, rules: StatsRules, found: stats.Cycles
) -> None:
    """The overload alerts of the component's cycles (docs/operation-statistics.md): the first
    overloaded cycle fires, the first one back under resolves; an ``overload`` point each."""
    thing, component = key
    firing: int | None = None
    duties = found.duty_pct
    for k, start in enumerate(found.start_ms.tolist()):
        band_ms, duty = found.band_ms[k], float(duties[k])
        why = "+".join(
            name
            for name, yes in (
                ("duty", duty > rated.duty_rating_pct),
                (
                    "overload",
                    rules.overload_after_ms is not None and band_ms[-1] > rules.overload_after_ms,
                ),
            )
            if yes
        )
        if why and firing is None:
            firing, status = start, "firing"
        elif not why and firing is not None:
            status = "resolved"
        else:
            continue
        out.add(
            1,
            thing=thing,
            component=component,
            rating=rated.rating_id,
            status=status,
            start_ms=np.array([start]),
            time_ns=np.array([start * NS_PER_MS]),
            duty_pct=np.array([duty]),
            duty_rating_pct=np.array([rated.duty_rating_pct]),
            peak_pct=np.array([100.0 * found.peak_w[k] / rated.rated_w]),
            overload_s=np.array([band_ms[-1] / 1000.0]),
            since_ms=np.array([firing]),
            cycle_end_ms=np.array([start + rules.cycle_ms]),
            why=why,
            pending=np.array([bool(found.pending[k])]),
            closes_ms=np.array([start + rules.cycle_ms]),
        )
        if status == "resolved":
            firing = None


def _cycle_points(
    cycles: _Columns,
    bands: _Columns,
    thing: str,
    component: str,
    rated: Rated,
    rules: StatsRules,
    found: stats.Cycles,
) -> None:
    """docs/influxdb-schema.md: an ``opstats`` point per cycle, an ``opstats_band`` per band."""
    n = len(found.start_ms)
    if not n:
        return
    length = rules.cycle_ms
    data = found.data_ms.astype(np.float64)
    duty = found.duty_pct
    mean = (found.motoring_wms + found.regenerative_wms) / data
    motoring = found.motoring_wms / stats.WMS_PER_KWH
    regenerative = found.regenerative_wms / stats.WMS_PER_KWH
    common = {
        "thing": thing,
        "component": component,
        "rating": rated.rating_id,
        "start_ms": found.start_ms,
        "time_ns": found.start_ms * NS_PER_MS,
        "pending": found.pending,
        "closes_ms": found.start_ms + length,
    }
    cycles.add(
        n,
        **common,
        power=rules.result_name,
        duty_pct=duty,
        duty_rating_pct=rated.duty_rating_pct,
        motoring_kwh=motoring,
        regenerative_kwh=regenerative,
        energy_kwh=motoring + regenerative,
        mean_w=mean,
        mean_pct=100.0 * mean / rated.rated_w,
        peak_w=found.peak_w,
        peak_pct=100.0 * found.peak_w / rated.rated_w,
        rated_power_kw=rated.rated_power_kw,
        data_s=data / 1000.0,
        no_data_s=(length - data) / 1000.0,
        overload_s=found.band_ms[:, -1] / 1000.0,
        duty_exceeded=(duty > rated.duty_rating_pct).astype(np.int64),
        rating_defaulted=int(rated.defaulted),
        cycle_ms=length,
    )
    cumulative = np.cumsum(found.band_ms, axis=0)
    for k, name in enumerate(rated.band_names):
        bands.add(
            n,
            **common,
            band=name,
            seconds=found.band_ms[:, k] / 1000.0,
            cumulative_hours=cumulative[:, k] / stats.MS_PER_HOUR,
            share_pct=100.0 * found.band_ms[:, k] / data,
        )
