#!/usr/bin/env python
"""Verdict: the driver's outputs are encoded column-wise (ColumnEncoder), not per record.

Benchmark of the column-wise Avro encoder against the one-record writer (a script, not a test).

    .venv/bin/python benchmarks/experiments/bench_avro_encode.py [--rows 50000] [--repeat 10]
        [--seed 7]

Builds a batch of joined pairs and one of window aggregates as the single pass renders them
(numpy columns: 32-hex ids, a few Things and quantities, millisecond times, doubles, constant
columns where a batch has one value, nulls in the unions), then prints us/record for
``ColumnEncoder.encode`` and for ``AvroCodec.encode`` over the same rows as dicts (the
baseline: one fastavro call per record), both with the registry header, and the ratio. Both
outputs are compared byte for byte before anything is timed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.support.timing import best_of, status
from streamkit.wire import AvroCodec
from streamkit.wire.avro_encode import ColumnEncoder

PREFIX = b"\x00\x00\x00\x00\x07"
THINGS = np.array(["R0815", "H31415", "R27182", "M4711", "Fräse-7"], dtype=object)
QUANTITIES = np.array(["actSpeed_C11", "vaTorque_C11", "vaLoad_C12", "temp_X1"], dtype=object)
START_MS = 1_700_000_000_000


def joined_columns(rows: int, rng: np.random.Generator) -> dict[str, Any]:
    left = START_MS + np.sort(rng.integers(0, 3_600_000, rows))
    right = left + rng.integers(-2_000, 2_000, rows)
    ids = rng.integers(0, 2**63, (rows, 2)).astype(">u8").tobytes().hex()
    return {
        "id": np.array([ids[i : i + 32] for i in range(0, len(ids), 32)], dtype=object),
        "thing": THINGS[rng.integers(0, len(THINGS), rows)],
        "left_quantity": "actSpeed_C11",
        "right_quantity": "vaTorque_C11",
        "left_time_ms": left,
        "right_time_ms": right,
        "left_value": rng.normal(1_500, 300, rows),
        "right_value": rng.normal(20, 5, rows),
        "result_name": "mechanical_power_kw",
        "result": rng.normal(3, 1, rows),
        "event_time_ms": np.maximum(left, right),
    }


def aggregate_columns(rows: int, rng: np.random.Generator) -> dict[str, Any]:
    start = START_MS + rng.integers(0, 360, rows) * 10_000
    count = rng.integers(1, 50, rows)
    stddev = np.where(count > 1, rng.random(rows), np.nan)
    closed = np.where(rng.random(rows) < 0.9, start + 12_000, np.nan)
    return {
        "thing": THINGS[rng.integers(0, len(THINGS), rows)],
        "quantity": QUANTITIES[rng.integers(0, len(QUANTITIES), rows)],
        "window_kind": "tumbling",
        "window_size_ms": 10_000,
        "window_slide_ms": 10_000,
        "window_start_ms": start,
        "window_end_ms": start + 10_000,
        "count": count,
        "mean": rng.normal(100, 10, rows),
        "min": rng.normal(80, 10, rows),
        "max": rng.normal(120, 10, rows),
        "stddev": stddev,
        "closed_at_ms": closed,
    }


def records(encoder: ColumnEncoder, columns: dict[str, Any], rows: int) -> list[dict[str, Any]]:
    """The same rows as the dicts the one-record writer takes (nulls as None)."""
    out: list[dict[str, Any]] = [{} for _ in range(rows)]
    for name, kind in encoder.fields:
        column = columns[name]
        values = column.tolist() if isinstance(column, np.ndarray) else [column] * rows
        if isinstance(kind, list):
            values = [None if v != v else int(v) if "long" in kind else v for v in values]
        for record, value in zip(out, values, strict=True):
            record[name] = value
    return out


def measure(
    schema: str, make: Callable[[int, np.random.Generator], dict], rows: int, repeat: int, seed: int
) -> tuple[float, float]:
    columns = make(rows, np.random.default_rng(seed))
    encoder, codec = ColumnEncoder(schema), AvroCodec(schema)
    dicts = records(encoder, columns, rows)
    got = encoder.encode(columns, rows, PREFIX)
    want = [PREFIX + codec.encode(r) for r in dicts]
    if got != want:
        raise SystemExit(f"{schema}: the column encoder's bytes differ from AvroCodec's")
    _, fast, _ = best_of(lambda: encoder.encode(columns, rows, PREFIX), repeat, f"{schema} columns")
    _, slow, _ = best_of(
        lambda: [PREFIX + codec.encode(r) for r in dicts], repeat, f"{schema} AvroCodec"
    )
    return fast / rows * 1e6, slow / rows * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50_000, help="rows per batch")
    parser.add_argument("--repeat", type=int, default=10, help="runs of each; the best is kept")
    parser.add_argument("--seed", type=int, default=7, help="seed of the synthetic batch")
    args = parser.parse_args()
    status(f"{args.rows:,} rows per schema, best of {args.repeat}")
    print(f"{'schema':<10} {'rows':>8} {'ColumnEncoder us/rec':>21} {'AvroCodec us/rec':>17} ratio")
    for schema, make in (("joined", joined_columns), ("aggregate", aggregate_columns)):
        fast, slow = measure(schema, make, args.rows, args.repeat, args.seed)
        print(f"{schema:<10} {args.rows:>8,} {fast:>21.3f} {slow:>17.3f} {slow / fast:.1f}x")


if __name__ == "__main__":
    main()
