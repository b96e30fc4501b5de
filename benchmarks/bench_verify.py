"""How long `python -m stacktools.verify` takes on the full-size events file.

Without a pipeline run: the expectation of the file is written as line protocol into a scratch
InfluxDB database of the running local stack (what an exact run leaves there), then the verify
command is timed against it as a subprocess (interpreter start included), and its verdict must
be "exact". The file is the cached full-size one (benchmarks/bench_e2e.py's, generated on first
use). Prints the rows, points and the phases' seconds.

    .venv/bin/python benchmarks/bench_verify.py [--rows N] [--keep]
"""

from __future__ import annotations

import math
import os
import sys
import time
from typing import Any

import pandas as pd

from benchmarks.support.events import events_file
from benchmarks.support.verify_timing import bench_parser, timed_verify
from spark_jobs.config import SinglePassSettings
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from stacktools.verify.events import read_records
from stacktools.verify.expect import expectation
from stacktools.verify.rules import rules_of

BATCH = 50_000


def _escape(text: str) -> str:
    return text.replace(",", r"\,").replace("=", r"\=").replace(" ", r"\ ")


def _tag(value: Any) -> str:
    if isinstance(value, float):
        return "" if math.isnan(value) else str(int(value))
    return str(value)


def _number(value: Any, integer: bool) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return f"{int(value)}i" if integer else repr(float(value))


def lines(measurement: str, frame: pd.DataFrame) -> list[str]:
    """The points an exact run leaves (docs/influxdb-schema.md)."""
    tags = {
        "raw": ["thing", "quantity"],
        "joined": ["thing", "pair", "result_name", "long_gap_ms"],
        "aggregate": ["thing", "quantity", "window"],
        "late": ["thing", "quantity", "stage", "reason"],
    }[measurement]
    fields = {
        "raw": {"value": False},
        "joined": {
            "result": False,
            "left_value": False,
            "right_value": False,
            "left_time_ms": True,
            "right_time_ms": True,
        },
        "aggregate": {
            "count": True,
            "mean": False,
            "min": False,
            "max": False,
            "stddev": False,
            "window_end_ms": True,
            "duration_ms": True,
            "closed_at_ms": True,
        },
        "late": {"value": False, "watermark_ms": True, "count": True},
    }[measurement]
    if measurement == "aggregate":
        frame = frame[~frame["pending"].astype(bool)]
    out = []
    for row in frame.to_dict("records"):
        tag_text = ",".join(f"{t}={_escape(_tag(row[t]))}" for t in tags if _tag(row[t]))
        field_text = ",".join(
            f"{name}={text}"
            for name, integer in fields.items()
            if (text := _number(row[name], integer)) is not None
        )
        out.append(f"{measurement},{tag_text} {field_text} {int(row['time_ns'])}")
    return out


def load(settings: Settings, database: str, frames: dict[str, pd.DataFrame]) -> int:
    client = InfluxClient(settings)
    client.create_scratch_database(database)
    written = 0
    for measurement, frame in frames.items():
        text = lines(measurement, frame)
        for start in range(0, len(text), BATCH):
            status = client.write(database, text[start : start + BATCH])
            if status != 204:
                raise RuntimeError(f"InfluxDB refused a write: {status}")
        written += len(text)
    return written


def main() -> int:
    args = bench_parser(__doc__ or "", "database").parse_args()
    settings = Settings.from_sources()
    events = args.events or events_file(args.rows, args.things)
    rules = rules_of(SinglePassSettings.from_sources())
    started = time.perf_counter()
    frames = expectation(read_records(events), rules).frames
    print(f"expectation in-process: {time.perf_counter() - started:.1f} s", flush=True)
    points = sum(len(f) for f in frames.values()) - int(frames["aggregate"]["pending"].sum())
    if args.reuse:
        database = args.reuse
    else:
        database = f"verify_bench_{os.getpid()}"
        started = time.perf_counter()
        points = load(settings, database, frames)
        print(f"loaded {points:,} points into {database} in {time.perf_counter() - started:.0f} s")
    try:
        code, wall, cpu, result = timed_verify(events, ["--database", database])
        print(
            f"verify: rows={result.get('rows', 0):,} records={result.get('records', 0):,} "
            f"points={points:,} exit={code} wall={wall:.1f}s "
            f"cpu={cpu:.1f}s (verify's own; InfluxDB's not counted) "
            f"phases={result.get('seconds')}"
        )
        return 0 if code == 0 else 1
    finally:
        if not (args.keep or args.reuse):
            InfluxClient(settings).drop_database(database)


if __name__ == "__main__":
    sys.exit(main())
