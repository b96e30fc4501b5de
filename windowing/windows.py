"""Event-time windows per (thing, quantity), judged against that key's own event time.

Pure (numpy only, no Spark), so the rules can be property-tested and benchmarked alone; the
aggregate job calls :func:`process` with each key's rows of a micro-batch in Kafka arrival order
and :func:`flush` when a key has been idle too long.

Why per key and not Spark's global watermark: a watermark over all partitions runs ahead of a
sparse partition whenever Spark reads the partitions unevenly (backlogs, restarts, one dense
machine), and one far-future reading moves it for everybody. Per (thing, quantity) is the
finest key whose records have a defined order (a thing lives in one Kafka partition) and the
key the windows are kept by, so one quantity's rate or clock never makes another one late.

The rules, for each key's records in arrival order (exactly; ``docs/windows.md``):

* ``clock`` is the newest event time seen; ``horizon`` = max(clock - allowed lateness, end of
  every window an idle flush closed). A record is **late** iff its event time < the horizon
  before it: reason ``behind_watermark`` (behind clock - lateness) or ``window_closed`` (in a
  window an idle flush already emitted).
* A record more than ``max_future_ms`` ahead of the batch's processing time is set aside as
  ``future_timestamp`` and moves no clock.
* Two records are *the same record* when their event times are equal (raw input: that is the
  Kafka key, thing|quantity|ms) or, with ``same_by_row_id`` (joined input, where pairs share
  event times), their event times and row ids are. Of the same record, **the last copy wins**,
  as in Kafka compaction and InfluxDB: an identical copy (row id and value) is a ``duplicate``;
  a different one replaces the copy held so far, which is set aside as ``superseded``. That
  holds while the record's windows are open; behind the horizon a copy is late like any record.
* Every other record counts in every window containing it; a window is emitted once, final,
  when the horizon reaches its end (session: last record + gap). Its statistics are computed
  at that moment from its records ordered by (event time, row id), so they are bit-identical
  however the input was cut into batches or where a restart happened.
* A window closed by the horizon carries ``closed_at_ms``: the clock at the record whose horizon
  first reached its closing time, the event time that made it closable (latency is measured from
  it). A function of the records, not of the batch they came in; None when an idle flush closed it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta

import numpy as np

from operators.time import END_TIME, NO_TIME, to_ms
from streamkit.durations import parse_duration
from streamkit.wire.labels import window_label
from windowing.classify import Running, Verdicts, classify, classify_each
from windowing.statistics import run_statistics

__all__ = [
    "STAGE",
    "SetAside",
    "Step",
    "Superseded",
    "Window",
    "WindowRules",
    "WindowSpec",
    "WindowState",
    "flush",
    "parse_windows",
    "process",
    "process_reference",
]

STAGE = "aggregate"


KINDS = ("tumbling", "sliding", "session")


@dataclass(frozen=True)
class WindowSpec:
    """A window kind: tumbling (slide = size), sliding, or session (size = slide = the gap).
    Sized by durations; the rules work in whole milliseconds (``size_ms``, ``slide_ms``)."""

    kind: str  # "tumbling" | "sliding" | "session"
    size: timedelta
    slide: timedelta
    size_ms: int = field(init=False, repr=False, compare=False)
    slide_ms: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"window kind must be one of {KINDS}, not {self.kind!r}")
        size = to_ms(self.size, what=f"{self.kind} window size")
        slide = to_ms(self.slide, what=f"{self.kind} window slide")
        if self.kind != "sliding" and slide != size:
            raise ValueError(f"a {self.kind} window slides by its size, got {self.slide}")
        if slide > size:
            raise ValueError(
                f"slide {self.slide} larger than size {self.size}: records would fall between "
                "windows"
            )
        object.__setattr__(self, "size_ms", size)
        object.__setattr__(self, "slide_ms", slide)

    @classmethod
    def tumbling(cls, size: timedelta) -> WindowSpec:
        return cls("tumbling", size, size)

    @classmethod
    def sliding(cls, size: timedelta, slide: timedelta) -> WindowSpec:
        return cls("sliding", size, slide)

    @classmethod
    def session(cls, gap: timedelta) -> WindowSpec:
        return cls("session", gap, gap)

    @property
    def label(self) -> str:
        """Part of the output key and the InfluxDB tag: distinguishes specs of the same kind."""
        return window_label(self.kind, self.size_ms, self.slide_ms)

    def starts(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row index, window start) for every window containing each time (not sessions)."""
        last = (times // self.slide_ms) * self.slide_ms
        per_row = self.size_ms // self.slide_ms + (1 if self.size_ms % self.slide_ms else 0)
        rows = np.repeat(np.arange(len(times)), per_row)
        starts = np.repeat(last, per_row) - np.tile(np.arange(per_row) * self.slide_ms, len(times))
        keep = starts + self.size_ms > np.repeat(times, per_row)
        return rows[keep], starts[keep]

    def last_end(self, times: np.ndarray) -> np.ndarray:
        """End of the last window each time belongs to: until then a window still needs it."""
        return (times // self.slide_ms) * self.slide_ms + self.size_ms


def parse_windows(tumbling: str, sliding: str, sessions: str = "") -> list[WindowSpec]:
    """The window settings' text form: ``tumbling``: comma list of sizes ('10s'; '' or 'off':
    none); ``sliding``: comma list of SIZE/SLIDE ('60s/10s'); ``sessions``: comma list of gaps
    ('30s')."""

    specs: list[WindowSpec] = [
        WindowSpec.tumbling(parse_duration(part)) for part in _items(tumbling)
    ]
    for part in _items(sliding):
        size_text, _, slide_text = part.partition("/")
        if not slide_text:
            raise ValueError(f"sliding window needs SIZE/SLIDE, got {part!r}")
        specs.append(WindowSpec.sliding(parse_duration(size_text), parse_duration(slide_text)))
    specs += [WindowSpec.session(parse_duration(part)) for part in _items(sessions)]
    if not specs:
        raise ValueError("no window configured")
    return specs


def _items(text: str) -> list[str]:
    return [
        p
        for p in (part.strip() for part in text.split(","))
        if p and p.lower() not in {"off", "none"}
    ]


@dataclass(frozen=True)
class WindowRules:
    specs: tuple[WindowSpec, ...]
    allowed_lateness: timedelta
    max_future: timedelta | None = None  # None: no check against the processing clock
    same_by_row_id: bool = False  # the same record: equal event time and row id (else: event time)
    allowed_lateness_ms: int = field(init=False, repr=False, compare=False)
    max_future_ms: int | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "specs", tuple(self.specs))
        lateness = to_ms(self.allowed_lateness, what="allowed lateness", allow_zero=True)
        object.__setattr__(self, "allowed_lateness_ms", lateness)
        future = self.max_future
        object.__setattr__(
            self,
            "max_future_ms",
            None if future is None else to_ms(future, what="max future", allow_zero=True),
        )


@dataclass
class WindowState:
    """What a key carries from batch to batch: its clocks, the counted records that a window
    not yet emitted still needs, sorted by (event time, row id), and its idle timer (kept by
    :class:`windowing.operator.WindowOperator`; the rules here carry it along untouched)."""

    clock_ms: int = NO_TIME
    horizon_ms: int = NO_TIME
    times: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    values: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))
    row_ids: list[str] = field(default_factory=list)
    #: processing time of the key's last call with data (or of its last timer)
    last_batch_ms: int = NO_TIME
    #: processing time at which the idle flush is due; None: no timer
    deadline_ms: int | None = None

    @property
    def has_open_windows(self) -> bool:
        return bool(len(self.times))


@dataclass(frozen=True)
class Window:
    """One emitted window. Sessions: start and end are the first and the last record's time.
    ``closed_at_ms``: the key's clock at the record whose horizon first reached the window's
    closing time (a function of the data, for latency "since it could close"); None when an idle
    flush closed it (processing time)."""

    spec: WindowSpec
    start_ms: int
    end_ms: int
    count: int
    mean: float
    min: float
    max: float
    stddev: float | None
    closed_at_ms: int | None


@dataclass(frozen=True)
class SetAside:
    index: int  # position in the batch as given
    reason: str
    horizon_ms: int  # what the record was compared with


@dataclass(frozen=True)
class Superseded:
    """A copy replaced by a later copy of the same record (possibly held since an earlier batch)."""

    time_ms: int
    value: float
    row_id: str
    horizon_ms: int


@dataclass
class Step:
    windows: list[Window]
    aside: list[SetAside]
    state: WindowState
    superseded: list[Superseded] = field(default_factory=list)


def process(
    rules: WindowRules,
    state: WindowState,
    times: np.ndarray,
    values: np.ndarray,
    row_ids: list[str],
    now_ms: int | None = None,
) -> Step:
    """One key's records of one batch, in arrival order: classify, count, emit what closed."""
    return _step(classify, rules, state, times, values, row_ids, now_ms)


def process_reference(
    rules: WindowRules,
    state: WindowState,
    times: np.ndarray,
    values: np.ndarray,
    row_ids: list[str],
    now_ms: int | None = None,
) -> Step:
    """:func:`process` with every record classified one by one, also those numpy can decide at
    once: the rule as written, which :func:`process` must equal (tests, benchmarks)."""
    return _step(classify_each, rules, state, times, values, row_ids, now_ms)


_Classifier = Callable[
    [WindowRules, WindowState, np.ndarray, np.ndarray, list, "int | None"], Verdicts
]


def _step(
    classifier: _Classifier,
    rules: WindowRules,
    state: WindowState,
    times: np.ndarray,
    values: np.ndarray,
    row_ids: list[str],
    now_ms: int | None,
) -> Step:
    times = np.asarray(times, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    row_ids = row_ids if isinstance(row_ids, list) else list(row_ids)  # slices of it are lists too
    verdicts = classifier(rules, state, times, values, row_ids, now_ms)
    held_times, held_values, held_ids = state.times, state.values, state.row_ids
    if verdicts.dropped:
        keep = np.setdiff1d(np.arange(len(held_times)), verdicts.dropped)
        held_times, held_values, held_ids = (
            held_times[keep],
            held_values[keep],
            _take(held_ids, keep),
        )
    counted = verdicts.counted
    kept = _sorted_records(
        np.concatenate([held_times, times[counted]]),
        np.concatenate([held_values, values[counted]]),
        held_ids + _take(row_ids, counted),
    )
    grown = replace(
        state,
        clock_ms=verdicts.clock_ms,
        horizon_ms=verdicts.horizon_ms,
        times=kept[0],
        values=kept[1],
        row_ids=kept[2],
    )
    windows, remaining = _close(rules, grown, state.horizon_ms, grown.horizon_ms, verdicts.running)
    return Step(
        windows,
        [SetAside(*a) for a in verdicts.aside],
        remaining,
        [Superseded(*s) for s in verdicts.superseded],
    )


def flush(rules: WindowRules, state: WindowState) -> Step:
    """Emit every open window of an idle key now; later records in them are ``window_closed``.
    No record closed them, so their ``closed_at_ms`` is None."""
    windows, remaining = _close(rules, state, state.horizon_ms, END_TIME)
    ends = [state.horizon_ms] + [
        w.end_ms + (w.spec.size_ms if w.spec.kind == "session" else 0) for w in windows
    ]
    return Step(windows, [], replace(remaining, horizon_ms=max(ends)))


def _take(items: list[str], at: np.ndarray) -> list[str]:
    """``items[at]`` for a list, a slice per run of consecutive positions: the positions taken
    are mostly runs (the records that count but a few late ones, the records in time order but
    a few that came late, the newest records still needed)."""
    if not len(at):
        return []
    breaks = (np.flatnonzero(np.diff(at) != 1) + 1).tolist()
    if not breaks:
        return items[int(at[0]) : int(at[0]) + len(at)]
    if len(breaks) > len(at) // 4:  # scattered: one by one is cheaper
        return [items[i] for i in at.tolist()]
    out: list[str] = []
    for first, a, b in zip(
        at[[0, *breaks]].tolist(), [0, *breaks], [*breaks, len(at)], strict=False
    ):
        out += items[first : first + b - a]
    return out


def _sorted_records(
    times: np.ndarray, values: np.ndarray, row_ids: list[str]
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """By (event time, row id): numpy for the times, Python only for the row ids of equal times."""
    if len(times) < 2 or bool(np.all(times[1:] > times[:-1])):
        return times, values, row_ids
    order = np.argsort(times, kind="stable")
    ordered = times[order]
    equal = ordered[1:] == ordered[:-1]
    if equal.any():  # within each run of equal times, by row id (the runs stay in place)
        at = np.flatnonzero(np.concatenate([[False], equal]) | np.concatenate([equal, [False]]))
        plain = times.tolist()
        order[at] = sorted(order[at].tolist(), key=lambda i: (plain[i], row_ids[i]))
    return times[order], values[order], _take(row_ids, order)


def _close(
    rules: WindowRules,
    state: WindowState,
    after_ms: int,
    until_ms: int,
    running: Running | None = None,
) -> tuple[list[Window], WindowState]:
    """Windows whose closing time is in (after_ms, until_ms], and the state without the records
    that no open window needs any more. ``running``: the batch whose records moved the horizon
    from after_ms to until_ms (None: an idle flush, no record closed them)."""
    times, values = state.times, state.values
    windows: list[Window] = []
    needed = np.zeros(len(times), bool)
    for spec in rules.specs:
        if spec.kind == "session":
            found, still_open = _sessions(spec, times, values, after_ms, until_ms, running)
        else:
            found = _fixed_windows(spec, times, values, after_ms, until_ms, running)
            still_open = spec.last_end(times) > until_ms
        windows.extend(found)
        needed |= still_open
    keep = np.flatnonzero(needed)
    remaining = replace(
        state, times=times[keep], values=values[keep], row_ids=_take(state.row_ids, keep)
    )
    return windows, remaining


def _fixed_windows(
    spec: WindowSpec,
    times: np.ndarray,
    values: np.ndarray,
    after_ms: int,
    until_ms: int,
    running: Running | None,
) -> list[Window]:
    """The windows ending in (after_ms, until_ms]: only records in (after_ms - size, until_ms)
    can be in one (the state may hold far more, e.g. a long window at a high rate)."""
    low = (
        0
        if after_ms - spec.size_ms < NO_TIME
        else int(np.searchsorted(times, after_ms - spec.size_ms, "right"))
    )
    high = int(np.searchsorted(times, until_ms, "left"))
    rows, starts = spec.starts(times[low:high])
    rows += low
    ends = starts + spec.size_ms
    closing = (ends > after_ms) & (ends <= until_ms)
    rows, starts = rows[closing], starts[closing]
    order = np.argsort(starts, kind="stable")  # within a window: (event time, row id) order
    rows, starts = rows[order], starts[order]
    if not len(rows):
        return []
    firsts = np.flatnonzero(np.concatenate([[True], starts[1:] != starts[:-1]]))
    counts = np.diff(np.append(firsts, len(rows)))
    ends = starts[firsts] + spec.size_ms
    return _windows(
        spec, starts[firsts], ends, values[rows], firsts, counts, _closed_at(running, ends)
    )


def _sessions(
    spec: WindowSpec,
    times: np.ndarray,
    values: np.ndarray,
    after_ms: int,
    until_ms: int,
    running: Running | None,
) -> tuple[list[Window], np.ndarray]:
    """Sessions (records less than a gap apart) closing in the range; and which records belong
    to a session still open."""
    if not len(times):
        return [], np.zeros(0, bool)
    firsts = np.flatnonzero(np.concatenate([[True], np.diff(times) >= spec.size_ms]))
    counts = np.diff(np.append(firsts, len(times)))
    lasts = firsts + counts - 1
    closes_at = times[lasts] + spec.size_ms
    still_open = closes_at > until_ms
    emit = ~still_open & (closes_at > after_ms)
    found = _windows(
        spec,
        times[firsts[emit]],
        times[lasts[emit]],
        values,
        firsts[emit],
        counts[emit],
        _closed_at(running, closes_at[emit]),
    )
    return found, np.repeat(still_open, counts)


def _closed_at(running: Running | None, closes: np.ndarray) -> list[int | None]:
    """Each window's ``closed_at_ms`` from its closing time: the clock at the record that made
    it closable, or None for all when no record did (an idle flush)."""
    if running is None or not len(closes):
        return [None] * len(closes)
    return [*running.clock_reaching(closes)]


def _windows(
    spec: WindowSpec,
    starts: np.ndarray,
    ends: np.ndarray,
    values: np.ndarray,
    firsts: np.ndarray,
    counts: np.ndarray,
    closed_at: list[int | None],
) -> list[Window]:
    """One window per run ``values[first:first + count]``, in the order given."""
    stats = (column.tolist() for column in run_statistics(values, firsts, counts))
    return [
        Window(spec, start, end, n, mean, low, high, stddev if n > 1 else None, closed)
        for start, end, n, mean, low, high, stddev, closed in zip(
            starts.tolist(), ends.tolist(), counts.tolist(), *stats, closed_at, strict=False
        )
    ]
