"""One verification: the file's expectation, what the run wrote (InfluxDB's points or the Kafka
topics' records: stacktools.verify.source), the comparison; shared by the command and the
demo."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from stacktools.stack.influx import InfluxClient
from stacktools.verify.actual import InfluxReader
from stacktools.verify.compare import Verdict, compare
from stacktools.verify.events import read_records
from stacktools.verify.expect import Expectation, expectation
from stacktools.verify.points import MEASUREMENTS, STATS_MEASUREMENTS
from stacktools.verify.resends import resent_copies
from stacktools.verify.rules import Rules
from stacktools.verify.source import Source
from streamkit.config import InfluxSettings


@dataclass
class Outcome:
    verdicts: list[Verdict]
    records: int
    rows: int
    seconds: dict[str, float] = field(default_factory=dict)
    live: bool = False
    source: str = InfluxReader.label
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return all(v.exact for v in self.verdicts)

    def as_dict(self) -> dict:
        return {
            "exact": self.exact,
            "live": self.live,
            "source": self.source,
            "notes": self.notes,
            "rows": self.rows,
            "records": self.records,
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
            "measurements": [v.as_dict() for v in self.verdicts],
        }


def certain_so_far(
    measurement: str, want: pd.DataFrame, cutoff: dict[str, int], lateness_ms: int
) -> pd.Series:
    """Live: which expected records must have landed by now. A Thing's cutoff is the newest
    event time among its raw points minus the margin; a raw point, a late record or a pair is
    certain below it, a window once the cutoff's horizon (cutoff - lateness) reached its closing
    time."""
    limit = want["thing"].astype(object).map(cutoff).astype("float64").fillna(-np.inf).to_numpy()
    if measurement == "joined":
        moment = np.maximum(want["left_time_ms"], want["right_time_ms"]).to_numpy(np.float64)
    elif measurement == "aggregate":
        return pd.Series(want["closes_ms"].to_numpy(np.float64) <= limit - lateness_ms)
    elif measurement in STATS_MEASUREMENTS:  # once both inputs passed the cycle's end
        return pd.Series(want["closes_ms"].to_numpy(np.float64) <= limit)
    else:
        moment = want["time_ms"].to_numpy(np.float64)
    return pd.Series(moment < limit)


def verify(
    settings: InfluxSettings,
    events: Path,
    database: str,
    rules: Rules,
    *,
    order: str = "event-time",
    max_future_ms: int | None = None,
    live_margin_ms: int | None = None,
    source: Source | None = None,
) -> Outcome:
    """``live_margin_ms`` set: a live run (only what is certain so far may be missing).
    ``source``: where the output is read (default: InfluxDB's ``database``)."""
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    records = read_records(events, order, max_future_ms)
    seconds["read file"] = time.perf_counter() - started
    mark = time.perf_counter()
    expected: Expectation = expectation(records, rules)
    seconds["expectation"] = time.perf_counter() - mark
    mark = time.perf_counter()
    reader: Source = source or InfluxReader(InfluxClient(settings), database)
    measurements = MEASUREMENTS + (STATS_MEASUREMENTS if rules.stats is not None else ())
    found = reader.read(measurements)
    seconds[f"read {reader.label}"] = time.perf_counter() - mark
    mark = time.perf_counter()
    cutoff: dict[str, int] = {}
    if live_margin_ms is not None and len(found["raw"]):
        newest = found["raw"].groupby("thing", observed=True)["time_ms"].max().dropna()
        cutoff = {str(k): int(v) - live_margin_ms for k, v in newest.items()}
    verdicts = []
    for m in measurements:
        want, got, keys = reader.compared(m, expected, found[m])
        certain = (
            certain_so_far(m, want, cutoff, rules.lateness_ms)
            if live_margin_ms is not None
            else None
        )
        resent = partial(resent_copies, expected.frames["raw"]) if m == "late" else None
        verdicts.append(compare(m, want, got, certain, resent, keys))
    seconds["compare"] = time.perf_counter() - mark
    seconds["total"] = time.perf_counter() - started
    live = live_margin_ms is not None
    return Outcome(
        verdicts, len(records), records.rows, seconds, live, reader.label, reader.notes()
    )
