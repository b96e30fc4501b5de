"""Event-time windows with an explicit lateness rule, as one stateful operator per (thing, quantity).

Why not Spark's built-in ``window()`` aggregation: it silently drops records behind the
watermark and a ``foreachBatch`` never sees them, but they must go to the late topic with a
reason. So the windows are kept by ``transformWithStateInPandas`` in EventTime mode, which
gives the batch's watermark and event-time timers for several windows per key. One pyspark
detail decides the shape: the stateful operators drop input rows behind the watermark *before*
user code sees them when the watermark column is among their input; the job therefore projects
the watermark column away after ``withWatermark`` (the query keeps its watermark and the timers
work) and classifies late rows itself.

Semantics (exact; deterministic for the batches recorded in the checkpoint):

* ``W_b``, the watermark of micro-batch b, is Spark's: max event time of all batches before b
  minus the delay (monotonic, 0 for the first batch; recorded in the offset log, so a
  replayed batch gets the same one).
* A record of batch b is **late** iff ``event_time_ms < W_b``: it goes to the late topic with
  reason ``behind_watermark`` and ``W_b``, and is aggregated nowhere. Otherwise it is added
  to every window that contains it: ``[start, start + size)``, starts aligned to the epoch at
  multiples of the slide (tumbling: slide = size).
* A record this (thing, quantity) already counted, by (event time, row id), is a **duplicate**
  (the bridge re-sends records after a restart; the raw topic keeps both until compaction): it
  goes to the late topic with reason ``duplicate`` and counts nowhere. The first one counts.
* A window is emitted once, final, by the first batch whose watermark is ``>= end``. Every
  record of it that comes later has ``event_time < end <= W`` and is therefore late, so an
  emitted window never changes. (A record can be late while its window is still open: the
  rule is about the record, not the window, which keeps it simple to state and to check.)
* Per key and batch the rows are sorted by (event time, row id) before accumulating, so a
  replayed batch gives bit-identical floats.

The classification depends on batch boundaries (inherent to watermarks): the same input split
into other micro-batches can classify a record differently.
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from streamkit.durations import parse_duration_ms

LATE_REASON = "behind_watermark"
DUPLICATE_REASON = "duplicate"
STAGE = "aggregate"

@dataclass(frozen=True)
class WindowSpec:
    kind: str  # "tumbling" | "sliding"
    size_ms: int
    slide_ms: int

    @property
    def label(self) -> str:
        """Part of the output key: distinguishes specs of the same kind."""
        return f"{self.kind}-{self.size_ms}" + (f"-{self.slide_ms}" if self.kind == "sliding" else "")

    def starts(self, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row index, window start) for every window containing each time."""
        last = (times // self.slide_ms) * self.slide_ms
        per_row = self.size_ms // self.slide_ms + (1 if self.size_ms % self.slide_ms else 0)
        rows = np.repeat(np.arange(len(times)), per_row)
        starts = np.repeat(last, per_row) - np.tile(np.arange(per_row) * self.slide_ms, len(times))
        keep = starts + self.size_ms > np.repeat(times, per_row)
        return rows[keep], starts[keep]


def parse_windows(tumbling: str, sliding: str) -> list[WindowSpec]:
    """``tumbling``: comma list of sizes ('10s', '' or 'off' for none); ``sliding``: comma
    list of SIZE/SLIDE ('60s/10s')."""
    specs: list[WindowSpec] = []
    for part in filter(None, (p.strip() for p in tumbling.split(","))):
        if part.lower() not in {"off", "none"}:
            size = parse_duration_ms(part)
            specs.append(WindowSpec("tumbling", size, size))
    for part in filter(None, (p.strip() for p in sliding.split(","))):
        if part.lower() in {"off", "none"}:
            continue
        size_text, _, slide_text = part.partition("/")
        if not slide_text:
            raise ValueError(f"sliding window needs SIZE/SLIDE, got {part!r}")
        size, slide = parse_duration_ms(size_text), parse_duration_ms(slide_text)
        if slide > size:
            raise ValueError(f"slide {slide_text} larger than size {size_text}: records would fall between windows")
        specs.append(WindowSpec("sliding", size, slide))
    if not specs:
        raise ValueError("no window configured")
    return specs


# ------------------------------------------------------------------------- Spark schemas
OUTPUT_FIELDS: list[tuple[str, str]] = [
    ("record_type", "string"), ("thing", "string"), ("quantity", "string"),
    ("window_kind", "string"), ("window_size_ms", "long"), ("window_slide_ms", "long"), ("window_label", "string"),
    ("window_start_ms", "long"), ("window_end_ms", "long"),
    ("count", "long"), ("mean", "double"), ("min", "double"), ("max", "double"), ("stddev", "double"),
    ("event_time_ms", "long"), ("value", "double"), ("row_id", "string"), ("reason", "string"), ("watermark_ms", "long"),
]
OUTPUT_SCHEMA_DDL = ", ".join(f"{name} {kind}" for name, kind in OUTPUT_FIELDS)
STATE_SCHEMA_DDL = "body string"

# One open window: [count, mean, M2 (sum of squared deviations), min, max]
Accumulator = list[float]


def _merge(acc: Accumulator | None, count: int, mean: float, m2: float, low: float, high: float) -> Accumulator:
    """Chan et al.'s parallel merge: numerically stable, unlike sums of squares."""
    if acc is None:
        return [count, mean, m2, low, high]
    n_a, mean_a, m2_a, low_a, high_a = acc
    n = n_a + count
    delta = mean - mean_a
    return [n, mean_a + delta * count / n, m2_a + m2 + delta * delta * n_a * count / n, min(low_a, low), max(high_a, high)]


def _window_id(spec: WindowSpec, start: int) -> str:
    return f"{spec.kind}|{spec.size_ms}|{spec.slide_ms}|{start}"


def accumulate(windows: dict[str, Accumulator], specs: list[WindowSpec], times: np.ndarray, values: np.ndarray) -> None:
    for spec in specs:
        rows, starts = spec.starts(times)
        if not len(rows):
            continue
        stats = (pd.DataFrame({"start": starts, "v": values[rows]}).groupby("start", sort=True)["v"]
                 .agg(["count", "mean", "var", "min", "max"]))
        for start, count, mean, var, low, high in stats.itertuples(name=None):
            m2 = float(var) * (count - 1) if count > 1 else 0.0
            wid = _window_id(spec, int(start))
            windows[wid] = _merge(windows.get(wid), int(count), float(mean), m2, float(low), float(high))


def expire(windows: dict[str, Accumulator], watermark_ms: int) -> list[tuple[str, int, int, int, Accumulator]]:
    """Remove and return (kind, size, slide, start, acc) of every window with end <= watermark."""
    done = []
    for wid in sorted(windows, key=lambda w: (int(w.rsplit("|", 1)[1]), w)):
        kind, size, slide, start = wid.split("|")
        if int(start) + int(size) <= watermark_ms:
            done.append((kind, int(size), int(slide), int(start), windows.pop(wid)))
    return done


def aggregate_rows(thing: str, quantity: str, closed: list[tuple[str, int, int, int, Accumulator]]) -> dict[str, list]:
    out: dict[str, list] = {name: [] for name, _ in OUTPUT_FIELDS}
    for kind, size, slide, start, (count, mean, m2, low, high) in closed:
        spec = WindowSpec(kind, size, slide)
        values = {"record_type": "aggregate", "thing": thing, "quantity": quantity, "window_kind": kind,
                  "window_size_ms": size, "window_slide_ms": slide, "window_label": spec.label,
                  "window_start_ms": start, "window_end_ms": start + size, "count": int(count), "mean": mean,
                  "min": low, "max": high, "stddev": math.sqrt(m2 / (count - 1)) if count > 1 else None}
        for name, _ in OUTPUT_FIELDS:
            out[name].append(values.get(name))
    return out


def late_rows(thing: str, quantity: str, aside: pd.DataFrame, watermark_ms: int) -> dict[str, list]:
    n = len(aside)
    out: dict[str, list] = {name: [None] * n for name, _ in OUTPUT_FIELDS}
    out.update(record_type=["late"] * n, thing=[thing] * n, quantity=[quantity] * n,
               event_time_ms=aside["event_time_ms"].tolist(), value=aside["value"].tolist(),
               row_id=aside["row_id"].tolist(), reason=aside["reason"].tolist(), watermark_ms=[watermark_ms] * n)
    return out


Identity = tuple[int, str]  # (event time, row id): what makes a record the same record again


def set_aside(batch: pd.DataFrame, watermark_ms: int, seen: set[Identity]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(set aside with a ``reason`` column, on time) rows of one key's batch, sorted so float
    sums are replay-stable. Set aside: behind the watermark, or a duplicate: a record this key
    already counted, recognised by (event time, row id) (a raw record re-sent by the bridge
    after a restart keeps its row id; joined results have their pair id, and several pairs may
    share an event time, so the time alone is not an identity). The first one counts."""
    batch = batch.sort_values(["event_time_ms", "row_id"], kind="stable", ignore_index=True)
    times = batch["event_time_ms"].to_numpy()
    is_late = times < watermark_ms
    known = np.fromiter(((t, r) in seen for t, r in zip(times.tolist(), batch["row_id"].tolist())), bool, len(batch))
    is_duplicate = ~is_late & (batch.duplicated(["event_time_ms", "row_id"]).to_numpy() | known)
    aside = is_late | is_duplicate
    reasons = np.where(is_late[aside], LATE_REASON, DUPLICATE_REASON)
    return batch[aside].assign(reason=reasons), batch[~aside]


def still_open(seen: set[Identity], watermark_ms: int) -> set[Identity]:
    """Identities worth remembering: below the watermark a repeat is late anyway."""
    return {(t, r) for t, r in seen if t >= watermark_ms}


def next_timer(windows: dict[str, Accumulator]) -> int | None:
    """Event-time timers fire when timer < watermark: one ms before the earliest window end
    fires exactly when watermark >= that end."""
    if not windows:
        return None
    return min(int(w.rsplit("|", 1)[1]) + int(w.split("|")[1]) for w in windows) - 1


def _frame(columns: dict[str, list]) -> pd.DataFrame:
    return pd.DataFrame(columns, columns=[name for name, _ in OUTPUT_FIELDS])


def make_processor(specs: list[WindowSpec]) -> Any:
    """A StatefulProcessor for transformWithStateInPandas (EventTime mode) over these specs.

    State per key: one JSON value {"windows": {...open windows...}, "timer": ts or null, "seen":
    [[event time, row id] at or above the watermark, for duplicates]}, one
    state read and write per key and batch (the issue's probe: one value per key was ~2x
    faster than a row per record).
    """
    from pyspark.sql.streaming import StatefulProcessor

    class WindowProcessor(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.handle = handle
            self.state = handle.getValueState("windows", STATE_SCHEMA_DDL)

        def _load(self) -> tuple[dict[str, Accumulator], int | None, set[Identity]]:
            if not self.state.exists():
                return {}, None, set()
            body = json.loads(self.state.get()[0])
            return body["windows"], body["timer"], {(t, r) for t, r in body.get("seen", ())}

        def _save(self, windows: dict[str, Accumulator], timer: int | None, seen: set[Identity], watermark: int, *,
                  fired: int | None = None) -> None:
            wanted = next_timer(windows)
            if timer is not None and timer != wanted and timer != fired:  # a fired timer is deleted by Spark
                self.handle.deleteTimer(timer)
            if wanted is not None and wanted != timer:
                self.handle.registerTimer(wanted)
            seen = still_open(seen, watermark)
            if windows or seen:
                self.state.update((json.dumps({"windows": windows, "timer": wanted, "seen": sorted(seen)}),))
            else:
                self.state.clear()

        def _emit(self, key: tuple, windows: dict[str, Accumulator], watermark: int) -> Iterator[pd.DataFrame]:
            closed = expire(windows, watermark)
            if closed:
                yield _frame(aggregate_rows(key[0], key[1], closed))

        def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
            watermark = max(int(timerValues.getCurrentWatermarkInMs()), 0)
            windows, timer, seen = self._load()
            batch = pd.concat(list(rows), ignore_index=True)
            aside, on_time = set_aside(batch, watermark, seen)
            if len(aside):
                yield _frame(late_rows(key[0], key[1], aside, watermark))
            times = on_time["event_time_ms"].to_numpy(dtype=np.int64)
            accumulate(windows, specs, times, on_time["value"].to_numpy(dtype=np.float64))
            yield from self._emit(key, windows, watermark)
            self._save(windows, timer, seen | set(zip(times.tolist(), on_time["row_id"].tolist())), watermark)

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[pd.DataFrame]:
            watermark = max(int(timerValues.getCurrentWatermarkInMs()), 0)
            windows, timer, seen = self._load()
            yield from self._emit(key, windows, watermark)
            self._save(windows, timer, seen, watermark, fired=expiredTimerInfo.getExpiryTimeInMs())

        def close(self) -> None:
            pass

    return WindowProcessor()
