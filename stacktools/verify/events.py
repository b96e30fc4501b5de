"""The events file as the raw topic receives it: one record per quantity of every valid row, in
the order the simulator replays the rows (event time, ties in file order; or file order).

Two readers give the same records. The fast one parses JSON lines with pyarrow and applies the
row rules of streamkit.events column-wise; it takes only files whose columns have the plain
types (string Thing and id, integer Timestamp, numeric quantities). Anything else (an array,
Python-style rows, string or fractional timestamps, a column of mixed types) goes through the
simulator's own row reader, one row at a time: slower, but every format it replays is read.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from streamkit.events import (
    MAX_TIME_MS,
    META_FIELDS,
    MIN_TIME_MS,
    parse_row,
    quantity_problem,
    thing_problem,
)
from streamkit.events_file import sniff
from streamkit.events_source import SourceStats, read_rows

ORDERS = ("event-time", "file")


@dataclass
class Records:
    """Every record in arrival order: codes into ``things`` / ``quantities``, the row's index
    into ``row_ids``."""

    things: list[str]
    quantities: list[str]
    thing: np.ndarray  # int32 codes
    quantity: np.ndarray  # int32 codes
    time_ms: np.ndarray  # int64
    value: np.ndarray  # float64
    row: np.ndarray  # int64, index into row_ids
    row_ids: Sequence[str] | np.ndarray
    rows: int  # valid rows replayed

    def __len__(self) -> int:
        return len(self.time_ms)


def read_records(
    path: Path, order: str = "event-time", max_future_ms: int | None = None
) -> Records:
    """``max_future_ms``: rows more than this ahead of now are left out (the bridge
    dead-letters them), as are times InfluxDB cannot store."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, not {order!r}")
    columns = _fast_columns(path)
    rows = columns if columns is not None else _slow_columns(path)
    horizon = (
        MAX_TIME_MS
        if max_future_ms is None
        else min(MAX_TIME_MS, int(time.time() * 1000) + max_future_ms)
    )
    keep = (rows.time_ms >= MIN_TIME_MS) & (rows.time_ms <= horizon)
    return rows.explode(keep, order)


@dataclass
class _Rows:
    """Valid rows in file order: their Thing code, time, id and one value column per quantity
    (NaN where the row does not hold it)."""

    things: list[str]
    thing: np.ndarray
    time_ms: np.ndarray
    row_ids: Sequence[str] | np.ndarray
    values: dict[str, np.ndarray]

    def explode(self, keep: np.ndarray, order: str) -> Records:
        rows = np.flatnonzero(keep)
        if order == "event-time":
            rows = rows[np.argsort(self.time_ms[rows], kind="stable")]
        position = np.empty(len(self.time_ms), dtype=np.int64)
        position[rows] = np.arange(len(rows))
        parts = []
        quantities = sorted(self.values)
        for code, name in enumerate(quantities):
            column = self.values[name]
            held = rows[~np.isnan(column[rows])]
            parts.append((position[held], np.full(len(held), code, np.int32), held, column[held]))
        if parts:
            pos = np.concatenate([p[0] for p in parts])
            arrival = np.argsort(pos, kind="stable")
            quantity = np.concatenate([p[1] for p in parts])[arrival]
            row = np.concatenate([p[2] for p in parts])[arrival]
            value = np.concatenate([p[3] for p in parts])[arrival]
        else:
            quantity, row, value = (np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0))
        return Records(
            self.things,
            quantities,
            self.thing[row].astype(np.int32),
            quantity,
            self.time_ms[row],
            value.astype(np.float64),
            row,
            self.row_ids,
            len(rows),
        )


def _timestamps_ms(stamps: np.ndarray) -> np.ndarray:
    """streamkit.events' magnitude rule on integers: seconds, ms, µs or ns, floored."""
    magnitude = np.abs(stamps)
    return np.select(
        [magnitude < 10**11, magnitude < 10**14, magnitude < 10**17],
        [stamps * 1000, stamps, stamps // 1000],
        stamps // 1_000_000,
    )


def _fast_columns(path: Path) -> _Rows | None:
    """None when the file is not plain JSON lines of plain column types."""
    layout = sniff(path)
    if layout.gzip or layout.bom or layout.array:
        return None
    try:
        table = pa_json.read_json(path, read_options=pa_json.ReadOptions(block_size=1 << 24))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError):
        return None
    schema = table.schema
    if schema.names.count("Thing") != 1 or len(set(schema.names)) != len(schema.names):
        return None
    if not pa.types.is_string(schema.field("Thing").type):
        return None
    if "Timestamp" not in schema.names or not pa.types.is_int64(schema.field("Timestamp").type):
        return None
    if "id" in schema.names and not (
        pa.types.is_string(schema.field("id").type) or pa.types.is_null(schema.field("id").type)
    ):
        return None
    names = [n for n in schema.names if n not in META_FIELDS]
    for name in names:
        kind = schema.field(name).type
        if not (pa.types.is_float64(kind) or pa.types.is_int64(kind) or pa.types.is_null(kind)):
            return None
    thing_col = table.column("Thing").combine_chunks().dictionary_encode()
    things = [str(t) for t in thing_col.dictionary.to_pylist()]
    thing_null = thing_col.is_null().to_numpy(zero_copy_only=False)
    thing_codes = thing_col.indices.fill_null(0).to_numpy(zero_copy_only=False)
    stamp_col = table.column("Timestamp")
    valid = ~thing_null & ~stamp_col.is_null().to_numpy(zero_copy_only=False)
    bad_things = np.array([thing_problem(t) is not None for t in things] or [False])
    valid &= ~bad_things[thing_codes]
    row_ids: Sequence[str] | np.ndarray
    if "id" in schema.names and pa.types.is_string(schema.field("id").type):
        id_column = table.column("id").fill_null("")
        if not pc.all(pc.utf8_is_printable(id_column)).as_py():
            return None  # the row reader's id rules decide those rows
        row_ids = id_column.to_numpy(zero_copy_only=False)
    else:
        row_ids = np.full(table.num_rows, "", dtype=object)
    values: dict[str, np.ndarray] = {}
    held_any = np.zeros(table.num_rows, dtype=bool)
    for name in names:
        column = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
        present = ~np.isnan(column)
        if quantity_problem(name) is not None:
            valid &= ~present  # a row with a bad quantity name is refused whole
            continue
        if not np.isfinite(column[present]).all():
            return None
        values[name] = column
        held_any |= present
    valid &= held_any
    stamps = stamp_col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    time_ms = _timestamps_ms(np.where(valid, stamps, 0))
    time_ms = np.where(valid, time_ms, MAX_TIME_MS + 1)  # invalid rows fall outside every range
    for name in values:
        values[name] = np.where(valid, values[name], np.nan)
    return _Rows(things, thing_codes.astype(np.int64), time_ms, row_ids, values)


def _slow_columns(path: Path) -> _Rows:
    """Every format the simulator replays, through its reader and streamkit's row rules."""
    things: dict[str, int] = {}
    thing, times, row_ids = [], [], []
    quantity_values: dict[str, dict[int, float]] = {}
    for index, source in enumerate(read_rows(path, SourceStats())):
        row = parse_row(source.payload)
        thing.append(things.setdefault(row.thing, len(things)))
        times.append(min(max(row.timestamp_ms, MIN_TIME_MS - 1), MAX_TIME_MS + 1))
        row_ids.append(row.row_id)
        for name, number in row.quantities.items():
            quantity_values.setdefault(name, {})[index] = number
    n = len(times)
    values = {}
    for name, held in quantity_values.items():
        column = np.full(n, np.nan)
        column[list(held)] = list(held.values())
        values[name] = column
    return _Rows(
        list(things),
        np.array(thing, dtype=np.int64),
        np.array(times, dtype=np.int64) if times else np.zeros(0, np.int64),
        row_ids,
        values,
    )
