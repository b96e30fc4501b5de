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
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import numpy as np

from streamkit.durations import parse_duration_ms
from streamkit.wire.labels import window_label

LATE_REASON = "behind_watermark"
CLOSED_REASON = "window_closed"
DUPLICATE_REASON = "duplicate"
SUPERSEDED_REASON = "superseded"
FUTURE_REASON = "future_timestamp"
STAGE = "aggregate"
NO_TIME = -(2**63)  # "never": below every event time
END_OF_TIME = 2**63 - 1


@dataclass(frozen=True)
class WindowSpec:
    """A window kind: tumbling (slide = size), sliding, or session (size = slide = the gap)."""

    kind: str  # "tumbling" | "sliding" | "session"
    size_ms: int
    slide_ms: int

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
    """``tumbling``: comma list of sizes ('10s'; '' or 'off': none); ``sliding``: comma list of
    SIZE/SLIDE ('60s/10s'); ``sessions``: comma list of gaps ('30s')."""
    specs: list[WindowSpec] = []
    for part in _items(tumbling):
        size = parse_duration_ms(part)
        specs.append(WindowSpec("tumbling", size, size))
    for part in _items(sliding):
        size_text, _, slide_text = part.partition("/")
        if not slide_text:
            raise ValueError(f"sliding window needs SIZE/SLIDE, got {part!r}")
        size, slide = parse_duration_ms(size_text), parse_duration_ms(slide_text)
        if slide > size:
            raise ValueError(f"slide {slide_text} larger than size {size_text}: records would fall between windows")
        specs.append(WindowSpec("sliding", size, slide))
    for part in _items(sessions):
        gap = parse_duration_ms(part)
        specs.append(WindowSpec("session", gap, gap))
    if not specs:
        raise ValueError("no window configured")
    return specs


def _items(text: str) -> list[str]:
    return [p for p in (part.strip() for part in text.split(",")) if p and p.lower() not in {"off", "none"}]


@dataclass(frozen=True)
class WindowRules:
    specs: tuple[WindowSpec, ...]
    allowed_lateness_ms: int
    max_future_ms: int | None = None  # None: no check against the processing clock
    same_by_row_id: bool = False  # the same record: equal event time and row id (else: event time)


@dataclass
class KeyState:
    """What a key carries from batch to batch: its clocks and the counted records that a window
    not yet emitted still needs, sorted by (event time, row id)."""

    clock_ms: int = NO_TIME
    horizon_ms: int = NO_TIME
    times: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    values: np.ndarray = field(default_factory=lambda: np.empty(0, np.float64))
    row_ids: list[str] = field(default_factory=list)

    @property
    def has_open_windows(self) -> bool:
        return bool(len(self.times))

    def to_row(self) -> tuple[int, int, bytes, bytes, str]:
        return (self.clock_ms, self.horizon_ms, self.times.astype("<i8").tobytes(),
                self.values.astype("<f8").tobytes(), json.dumps(self.row_ids))

    @classmethod
    def from_row(cls, row: tuple) -> KeyState:
        clock, horizon, times, values, row_ids = row
        return cls(int(clock), int(horizon), np.frombuffer(times, "<i8").astype(np.int64),
                   np.frombuffer(values, "<f8").astype(np.float64), json.loads(row_ids))


@dataclass(frozen=True)
class Window:
    """One emitted window. Sessions: start and end are the first and the last record's time."""

    spec: WindowSpec
    start_ms: int
    end_ms: int
    count: int
    mean: float
    min: float
    max: float
    stddev: float | None


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
    state: KeyState
    superseded: list[Superseded] = field(default_factory=list)


def process(rules: WindowRules, state: KeyState, times: np.ndarray, values: np.ndarray, row_ids: list[str],
            now_ms: int | None = None) -> Step:
    """One key's records of one batch, in arrival order: classify, count, emit what closed."""
    times = np.asarray(times, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    n = len(times)
    future = np.zeros(n, bool)
    if rules.max_future_ms is not None and now_ms is not None:
        future = times > now_ms + rules.max_future_ms
    clocks = np.maximum.accumulate(np.concatenate([[state.clock_ms], np.where(future, NO_TIME, times)]))
    pushes = np.where(future, NO_TIME, _minus(times, rules.allowed_lateness_ms))
    horizons = np.maximum.accumulate(np.concatenate([[state.horizon_ms], pushes]))
    before = horizons[:-1]
    late = ~future & (times < before)
    behind_clock = times < _minus(clocks[:-1], rules.allowed_lateness_ms)

    identity = (lambda t, row_id: (t, row_id)) if rules.same_by_row_id else (lambda t, row_id: t)
    held_before = {identity(t, r): k for k, (t, r) in enumerate(zip(state.times.tolist(), state.row_ids))}
    dropped: list[int] = []  # state records replaced by a copy in this batch
    held: dict[object, int] = {}  # same record -> batch index of its current copy
    aside: list[SetAside] = []
    superseded: list[Superseded] = []
    for i in range(n):
        if future[i]:
            aside.append(SetAside(i, FUTURE_REASON, int(before[i])))
        elif late[i]:
            aside.append(SetAside(i, LATE_REASON if behind_clock[i] else CLOSED_REASON, int(before[i])))
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
                aside.append(SetAside(i, DUPLICATE_REASON, int(before[i])))
                continue
            superseded.append(Superseded(*old, int(before[i])))
            if from_state:
                dropped.append(held_before.pop(same))
            held[same] = i
    counted = sorted(held.values())
    if dropped:
        keep = np.setdiff1d(np.arange(len(state.times)), dropped)
        state = replace(state, times=state.times[keep], values=state.values[keep],
                        row_ids=[state.row_ids[k] for k in keep])
    kept = _sorted_records(np.concatenate([state.times, times[counted]]),
                           np.concatenate([state.values, values[counted]]),
                           state.row_ids + [row_ids[i] for i in counted])
    grown = KeyState(int(clocks[-1]), int(horizons[-1]), *kept)
    windows, remaining = _close(rules, grown, state.horizon_ms, grown.horizon_ms)
    return Step(windows, aside, remaining, superseded)


def flush(rules: WindowRules, state: KeyState) -> Step:
    """Emit every open window of an idle key now; later records in them are ``window_closed``."""
    windows, remaining = _close(rules, state, state.horizon_ms, END_OF_TIME)
    ends = [state.horizon_ms] + [w.end_ms + (w.spec.size_ms if w.spec.kind == "session" else 0) for w in windows]
    return Step(windows, [], replace(remaining, horizon_ms=max(ends)))


def _minus(times: np.ndarray, amount: int) -> np.ndarray:
    """times - amount, with "never" staying "never" (no wrap-around)."""
    return np.where(times == NO_TIME, NO_TIME, times - amount)


def _sorted_records(times: np.ndarray, values: np.ndarray, row_ids: list[str]
                    ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """By (event time, row id): numpy for the times, Python only when some times are equal."""
    order = np.argsort(times, kind="stable")
    ordered = times[order]
    if len(ordered) > 1 and bool(np.any(ordered[1:] == ordered[:-1])):
        plain = times.tolist()
        order = np.array(sorted(range(len(plain)), key=lambda i: (plain[i], row_ids[i])), dtype=np.int64)
    return times[order], values[order], [row_ids[i] for i in order]


def _close(rules: WindowRules, state: KeyState, after_ms: int, until_ms: int) -> tuple[list[Window], KeyState]:
    """Windows whose closing time is in (after_ms, until_ms], and the state without the records
    that no open window needs any more."""
    times, values = state.times, state.values
    windows: list[Window] = []
    needed = np.zeros(len(times), bool)
    for spec in rules.specs:
        if spec.kind == "session":
            found, still_open = _sessions(spec, times, values, after_ms, until_ms)
        else:
            found = _fixed_windows(spec, times, values, after_ms, until_ms)
            still_open = spec.last_end(times) > until_ms
        windows.extend(found)
        needed |= still_open
    keep = np.flatnonzero(needed)
    remaining = KeyState(state.clock_ms, state.horizon_ms, times[keep], values[keep],
                         [state.row_ids[i] for i in keep])
    return windows, remaining


def _fixed_windows(spec: WindowSpec, times: np.ndarray, values: np.ndarray, after_ms: int,
                   until_ms: int) -> list[Window]:
    rows, starts = spec.starts(times)
    ends = starts + spec.size_ms
    closing = (ends > after_ms) & (ends <= until_ms)
    rows, starts = rows[closing], starts[closing]
    order = np.argsort(starts, kind="stable")  # within a window: (event time, row id) order
    rows, starts = rows[order], starts[order]
    if not len(rows):
        return []
    firsts = np.flatnonzero(np.concatenate([[True], starts[1:] != starts[:-1]]))
    return [_window(spec, int(starts[a]), int(starts[a]) + spec.size_ms, values[rows[a:b]])
            for a, b in zip(firsts, [*firsts[1:], len(rows)])]


def _sessions(spec: WindowSpec, times: np.ndarray, values: np.ndarray, after_ms: int,
              until_ms: int) -> tuple[list[Window], np.ndarray]:
    """Sessions (records less than a gap apart) closing in the range; and which records belong
    to a session still open."""
    if not len(times):
        return [], np.zeros(0, bool)
    firsts = np.flatnonzero(np.concatenate([[True], np.diff(times) >= spec.size_ms]))
    lasts = [*firsts[1:], len(times)]
    windows, still_open = [], np.zeros(len(times), bool)
    for a, b in zip(firsts, lasts):
        closes_at = int(times[b - 1]) + spec.size_ms
        if closes_at > until_ms:
            still_open[a:b] = True
        elif closes_at > after_ms:
            windows.append(_window(spec, int(times[a]), int(times[b - 1]), values[a:b]))
    return windows, still_open


def _window(spec: WindowSpec, start: int, end: int, values: np.ndarray) -> Window:
    n = len(values)
    mean = float(np.sum(values) / n)
    stddev = float(np.sqrt(np.sum((values - mean) ** 2) / (n - 1))) if n > 1 else None
    return Window(spec, start, end, n, mean, float(values.min()), float(values.max()), stddev)
