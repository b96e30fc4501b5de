"""The records the stages would write for an expectation of stacktools.verify, built from its
frames for verify's topic tests: (Kafka key, Thing, Avro value) per record and topic kind. The
inverse of the record -> point mapping of docs/influxdb-schema.md, written here from the doc
and the schemas, not from verify's reader. And the verify command run as a user runs it."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from stacktools.verify.expect import Expectation
from streamkit.paths import REPO_ROOT
from streamkit.wire import (
    AvroCodec,
    aggregate_key,
    cycle_key,
    overload_key,
    parse_window_label,
    record_key,
    window_label,
)
from streamkit.wire.registry import frame

#: The declared output topics verify reads, per kind (a run's are ``<name>.<run>``).
DECLARED = {
    "raw": "machinedata.raw",
    "joined": "machinedata.joined",
    "aggregates": "machinedata.aggregates",
    "late": "machinedata.late",
    "opstats": "machinedata.opstats",
    "overloads": "machinedata.overloads",
}

#: (Kafka key, Thing, value) of one record.
Record = tuple[bytes, str, bytes]


def _optional(value: object) -> object:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _measurement(r: Any) -> dict:
    """The raw record's fields, which a late record repeats."""
    return {
        "thing": str(r.thing),
        "quantity": str(r.quantity),
        "event_time_ms": int(r.time_ms),
        "value": float(r.value),
        "row_id": f"row-{r.time_ms}",
    }


def raw_fields(frame: pd.DataFrame) -> Iterator[dict]:
    for r in frame.itertuples(index=False):
        yield _measurement(r)


def joined_fields(frame: pd.DataFrame) -> Iterator[dict]:
    for r in frame.itertuples(index=False):
        left, right = str(r.pair).split(":")
        yield {
            "id": f"{r.thing}|{r.pair}|{int(r.left_time_ms)}|{int(r.right_time_ms)}",
            "thing": str(r.thing),
            "left_quantity": left,
            "right_quantity": right,
            "left_time_ms": int(r.left_time_ms),
            "right_time_ms": int(r.right_time_ms),
            "left_value": float(r.left_value),
            "right_value": float(r.right_value),
            "result_name": str(r.result_name),
            "component": str(r.component),
            "result": float(r.result),
            "event_time_ms": max(int(r.left_time_ms), int(r.right_time_ms)),
        }


def aggregate_fields(frame: pd.DataFrame) -> Iterator[dict]:
    for r in frame.itertuples(index=False):
        label = parse_window_label(str(r.window))
        closed = _optional(r.closed_at_ms)
        yield {
            "thing": str(r.thing),
            "quantity": str(r.quantity),
            "window_kind": label.kind,
            "window_size_ms": label.size_ms,
            "window_slide_ms": label.slide_ms,
            "window_start_ms": int(r.start_ms),
            "window_end_ms": int(r.window_end_ms),
            "count": int(r.count),
            "mean": float(r.mean),
            "min": float(r.min),
            "max": float(r.max),
            "stddev": _optional(float(r.stddev)),
            "closed_at_ms": None if closed is None else int(closed),  # type: ignore[call-overload]
        }


def late_fields(frame: pd.DataFrame) -> Iterator[dict]:
    for r in frame.itertuples(index=False):
        watermark = _optional(r.watermark_ms)
        yield {
            **_measurement(r),
            "reason": str(r.reason),
            "stage": str(r.stage),
            "watermark_ms": None if watermark is None else int(watermark),  # type: ignore[call-overload]
        }


def opstats_fields(cycles: pd.DataFrame, bands: pd.DataFrame) -> Iterator[dict]:
    """The OperationCycle records of the certain cycles, from the ``opstats`` points and their
    ``opstats_band`` points (the record -> points mapping read backwards)."""
    for r in cycles[~cycles["pending"]].itertuples(index=False):
        mine = bands[
            (bands["thing"] == r.thing)
            & (bands["component"] == r.component)
            & (bands["start_ms"] == r.start_ms)
        ]
        yield {
            "thing": str(r.thing),
            "component": str(r.component),
            "power_name": str(r.power),
            "rating_id": str(r.rating),
            "cycle_start_ms": int(r.start_ms),
            "cycle_end_ms": int(r.start_ms + r.cycle_ms),
            "rated_power_kw": float(r.rated_power_kw),
            "duty_rating_pct": float(r.duty_rating_pct),
            "rating_defaulted": bool(r.rating_defaulted),
            "band_names": [str(b) for b in mine["band"]],
            "band_ms": [round(x * 1000) for x in mine["seconds"]],
            "cumulative_ms": [round(x * 3_600_000) for x in mine["cumulative_hours"]],
            "data_ms": round(r.data_s * 1000),
            "duty_pct": float(r.duty_pct),
            "motoring_kwh": float(r.motoring_kwh),
            "regenerative_kwh": float(r.regenerative_kwh),
            "mean_w": float(r.mean_w),
            "peak_w": float(r.peak_w),
        }


def overload_fields(alerts: pd.DataFrame, cycles: pd.DataFrame) -> Iterator[dict]:
    """The OverloadEvent records of the certain alerts, from their ``overload`` points and their
    cycles' ``opstats`` points (the rated power and the peak in watts)."""
    for r in alerts[~alerts["pending"]].itertuples(index=False):
        (cycle,) = cycles[
            (cycles["thing"] == r.thing)
            & (cycles["component"] == r.component)
            & (cycles["start_ms"] == r.start_ms)
        ].itertuples(index=False)
        yield {
            "thing": str(r.thing),
            "component": str(r.component),
            "rating_id": str(r.rating),
            "status": str(r.status),
            "since_ms": int(r.since_ms),
            "cycle_start_ms": int(r.start_ms),
            "cycle_end_ms": int(r.cycle_end_ms),
            "why": str(r.why),
            "duty_pct": float(r.duty_pct),
            "duty_rating_pct": float(r.duty_rating_pct),
            "overload_ms": round(r.overload_s * 1000),
            "peak_w": float(cycle.peak_w),
            "rated_power_kw": float(cycle.rated_power_kw),
        }


def key_of(kind: str, fields: dict) -> bytes:
    if kind == "overloads":
        return overload_key(fields["thing"], fields["component"])
    if kind == "opstats":
        return cycle_key(
            fields["thing"], fields["component"], fields["rating_id"], fields["cycle_start_ms"]
        )
    if kind == "joined":
        return fields["id"].encode()
    if kind == "aggregates":
        label = window_label(
            fields["window_kind"], fields["window_size_ms"], fields["window_slide_ms"]
        )
        return aggregate_key(fields["thing"], fields["quantity"], label, fields["window_start_ms"])
    return record_key(fields["thing"], fields["quantity"], fields["event_time_ms"])


SCHEMAS = {
    "raw": "measurement",
    "joined": "joined",
    "aggregates": "aggregate",
    "late": "late",
    "opstats": "opstats",
    "overloads": "overload",
}


def records(expected: Expectation, schema_ids: dict[str, int] | None = None) -> dict[str, list]:
    """Per topic kind (raw, joined, aggregates, late, opstats) the records of an exact run: every
    raw point and late record, the pairs, windows and cycles the data made final; ``schema_ids``:
    framed with the registry header of each kind's schema id."""
    frames = expected.frames
    closed = frames["aggregate"][~frames["aggregate"]["pending"]]
    late = expected.late_records if expected.late_records is not None else frames["late"]
    fields = {
        "raw": list(raw_fields(frames["raw"])),
        "joined": list(joined_fields(frames["joined"][~frames["joined"]["pending"]])),
        "aggregates": list(aggregate_fields(closed)),
        "late": list(late_fields(late)),
    }
    if "opstats" in frames:
        fields["opstats"] = list(opstats_fields(frames["opstats"], frames["opstats_band"]))
        fields["overloads"] = list(overload_fields(frames["overload"], frames["opstats"]))
    out: dict[str, list] = {}
    for kind, items in fields.items():
        codec = AvroCodec(SCHEMAS[kind])
        header = frame(schema_ids[kind]) if schema_ids else b""
        out[kind] = [(key_of(kind, f), f["thing"], header + codec.encode(f)) for f in items]
    return out


def fields_of(kind: str, value: bytes) -> dict:
    return AvroCodec(SCHEMAS[kind]).decode(value)


def encoded(kind: str, fields: dict) -> bytes:
    return AvroCodec(SCHEMAS[kind]).encode(fields)


def run_verify(
    events: Path,
    source: list[str],
    out: Path,
    env: dict[str, str] | None = None,
    timeout_s: float | None = 300,
) -> tuple[int, str, dict]:
    """``python -m stacktools.verify`` on ``events`` against ``source`` (its options naming the
    database or the topics), as a user runs it: exit code, what it printed, the JSON verdict."""
    done = subprocess.run(
        [sys.executable, "-m", "stacktools.verify", "--events", str(events), *source]
        + ["--json", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
    )
    verdict = json.loads(out.read_text()) if out.exists() else {}
    return done.returncode, done.stdout + done.stderr, verdict


def measurement(verdict: dict, name: str) -> dict:
    """One measurement's part of a JSON verdict."""
    return next(m for m in verdict["measurements"] if m["measurement"] == name)
