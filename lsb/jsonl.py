"""Fast, forgiving reader for events.json-style JSON lines.

The bulk of a file goes through pyarrow's C++ JSON reader with an explicit
schema (only the four columns the join needs; every other field is ignored).
That reader rejects a whole block for one bad line, so a failing block is
split in halves until the bad lines are isolated and parsed one by one in
Python (``json``, then ``ast.literal_eval`` for Python-dict style lines).  A
clean file never touches the slow path; a dirty one pays per bad region only.
Without pyarrow everything takes the per-line path.
"""

from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

try:  # pyarrow is optional: it only makes reading fast.
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pa_json

    from . import arrow_np
except ImportError:  # pragma: no cover - exercised only without pyarrow
    pa = None
    pa_json = None

#: Below this many lines a failing block is parsed line by line.
_MIN_BLOCK_LINES = 64


@dataclass
class Rows:
    """Usable rows in file order: key, time and the two values (NaN = absent)."""

    #: Per parsed block: the keys, as a pyarrow array or a list of str.
    key_chunks: list[Any] = field(default_factory=list)
    times: list[np.ndarray] = field(default_factory=list)
    left: list[np.ndarray] = field(default_factory=list)
    right: list[np.ndarray] = field(default_factory=list)
    bad_lines: int = 0
    #: First few bad lines (1-based line number, reason) for the report.
    bad_examples: list[tuple[int, str]] = field(default_factory=list)


def read_rows(data: bytes, key_field: str, time_field: str, left: str, right: str) -> Rows:
    """Parse a whole file's bytes; rows with neither quantity are dropped, bad lines counted."""
    rows = Rows()
    if not data.endswith(b"\n"):
        data += b"\n"
    if pa_json is None:
        _python_block(data, 1, rows, key_field, time_field, left, right)
        return rows
    schema = pa.schema(
        [
            (key_field, pa.string()),
            (time_field, pa.int64()),
            (left, pa.float64()),
            (right, pa.float64()),
        ]
    )
    opts = pa_json.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    # Blocks of ~4 MB bounded at line ends; each is tried whole first.
    step = max(1, int(len(newlines) * (4 << 20) / max(len(data), 1)))
    start_line = 0
    while start_line < len(newlines):
        end_line = min(start_line + step, len(newlines))
        _arrow_block(
            data, newlines, start_line, end_line, rows, opts, key_field, time_field, left, right
        )
        start_line = end_line
    return rows


def _span(data: bytes, newlines: np.ndarray, lo: int, hi: int) -> bytes:
    """Bytes of lines [lo, hi) (0-based), each with its newline."""
    begin = 0 if lo == 0 else int(newlines[lo - 1]) + 1
    return data[begin : int(newlines[hi - 1]) + 1]


def _arrow_block(
    data, newlines, lo, hi, rows: Rows, opts, key_field, time_field, left, right
) -> None:
    chunk = _span(data, newlines, lo, hi)
    try:
        table = pa_json.read_json(pa.BufferReader(chunk), parse_options=opts)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowException):
        if hi - lo <= _MIN_BLOCK_LINES:
            _python_block(chunk, lo + 1, rows, key_field, time_field, left, right)
        else:
            mid = (lo + hi) // 2
            _arrow_block(data, newlines, lo, mid, rows, opts, key_field, time_field, left, right)
            _arrow_block(data, newlines, mid, hi, rows, opts, key_field, time_field, left, right)
        return
    _add_table(table, rows, key_field, time_field, left, right, lo + 1)


def _add_table(table, rows: Rows, key_field, time_field, left, right, first_line: int) -> None:
    lcol, rcol = table.column(left), table.column(right)
    has_l, has_r = arrow_np.valid(lcol), arrow_np.valid(rcol)
    lv = np.where(has_l, arrow_np.values(lcol, np.float64), np.nan)
    rv = np.where(has_r, arrow_np.values(rcol, np.float64), np.nan)
    wanted = has_l | has_r
    key_ok = arrow_np.valid(table.column(key_field))
    time_ok = arrow_np.valid(table.column(time_field))
    with np.errstate(invalid="ignore"):
        finite = (~has_l | np.isfinite(lv)) & (~has_r | np.isfinite(rv))
    good = wanted & key_ok & time_ok & finite
    bad = wanted & ~good
    if bad.any():
        rows.bad_lines += int(bad.sum())
        for i in np.flatnonzero(bad)[: max(0, 5 - len(rows.bad_examples))].tolist():
            rows.bad_examples.append((first_line + i, "missing key/time or non-finite value"))
    times = arrow_np.values(table.column(time_field), np.int64)
    keys = table.column(key_field)
    if not good.all():
        keys = pc.filter(keys, arrow_np.to_arrow(good))
        times, lv, rv = times[good], lv[good], rv[good]
    if len(times) == 0:
        return
    rows.key_chunks.append(keys)
    rows.times.append(np.array(times, dtype=np.int64))
    rows.left.append(lv)
    rows.right.append(rv)


def _number(x: object) -> float | None:
    """A finite JSON number as float, None if absent/null; raises on anything else."""
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"value {x!r} is not a number")
    f = float(x)
    if not math.isfinite(f):
        raise ValueError(f"value {x!r} is not finite")
    return f


def parse_line(
    line: bytes, key_field: str, time_field: str, left: str, right: str
) -> tuple[str, int, float, float] | None:
    """One line -> (key, time, left or NaN, right or NaN); None if it holds neither quantity.

    Raises ValueError for a line that is not a usable record.
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("not utf-8") from e
    try:
        obj = json.loads(text)
    except ValueError:
        try:
            obj = ast.literal_eval(text.strip())  # Python-dict style lines ('single quotes')
        except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
            raise ValueError("malformed line") from e
    if not isinstance(obj, dict):
        raise ValueError("not an object")
    lv, rv = _number(obj.get(left)), _number(obj.get(right))
    if lv is None and rv is None:
        return None
    key, t = obj.get(key_field), obj.get(time_field)
    if not isinstance(key, str):
        raise ValueError(f"{key_field} missing or not a string")
    if isinstance(t, bool) or not isinstance(t, int) or not -(2**63) < t < 2**63:
        raise ValueError(f"{time_field} missing or not an integer")
    return key, t, (math.nan if lv is None else lv), (math.nan if rv is None else rv)


def _python_block(
    chunk: bytes, first_line: int, rows: Rows, key_field, time_field, left, right
) -> None:
    keys: list[str] = []
    times: list[int] = []
    lvs: list[float] = []
    rvs: list[float] = []
    for n, line in enumerate(chunk.split(b"\n")):
        if not line.strip():
            continue
        try:
            rec = parse_line(line, key_field, time_field, left, right)
        except ValueError as e:
            rows.bad_lines += 1
            if len(rows.bad_examples) < 5:
                rows.bad_examples.append((first_line + n, str(e)))
            continue
        if rec is not None:
            keys.append(rec[0])
            times.append(rec[1])
            lvs.append(rec[2])
            rvs.append(rec[3])
    if keys:
        rows.key_chunks.append(keys)
        rows.times.append(np.array(times, dtype=np.int64))
        rows.left.append(np.array(lvs, dtype=np.float64))
        rows.right.append(np.array(rvs, dtype=np.float64))


def key_codes(rows: Rows) -> tuple[np.ndarray, list[str]]:
    """Dense key codes per row (file order) and the key names."""
    names: dict[str, int] = {}
    parts = []
    for chunk in rows.key_chunks:
        if pa is not None and isinstance(chunk, (pa.ChunkedArray, pa.Array)):
            enc = chunk.dictionary_encode()
            if isinstance(enc, pa.ChunkedArray):
                enc = enc.combine_chunks()
            local = [names.setdefault(k, len(names)) for k in enc.dictionary.to_pylist()]
            parts.append(np.asarray(local, dtype=np.int64)[arrow_np.values(enc.indices, np.int32)])
        else:
            parts.append(np.array([names.setdefault(k, len(names)) for k in chunk], dtype=np.int64))
    codes = np.concatenate(parts) if parts else np.empty(0, np.int64)
    return codes, list(names)
