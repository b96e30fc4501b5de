"""Joined pairs -> JSON lines, built column-wise.

With pyarrow every number is formatted in C++ (shortest round-trip float
text, so values survive exactly) and lines are concatenated in one kernel;
the result's data buffer is written as is.  The Python fallback writes the
same JSON values (float text may differ, e.g. 1e-07 vs 1e-7).
"""

from __future__ import annotations

import json
import math
from typing import BinaryIO

import numpy as np

from .config import JoinConfig
from .output import PairColumns
from .results import pair_ids_hex

try:
    import pyarrow as pa
    import pyarrow.compute as pc

    from .arrow_np import literal, to_arrow
except ImportError:  # pragma: no cover
    pa = None
    pc = None


def write_pairs(
    out: BinaryIO, key: str, config: JoinConfig, cols: PairColumns, with_id: bool = True
) -> int:
    """Write one line per pair; returns the number of lines."""
    n = len(cols)
    if n == 0:
        return 0
    spec_names = [(p.left, p.right) for p in config.pairs]
    for k in np.unique(cols.pair).tolist():
        rows = np.flatnonzero(cols.pair == k) if len(spec_names) > 1 else None
        sub = (
            cols
            if rows is None
            else PairColumns(*(getattr(cols, f)[rows] for f in ("pair",) + _COLS))
        )
        left_q, right_q = spec_names[k]
        thing, left, right = json.dumps(key), json.dumps(left_q), json.dumps(right_q)
        prefix = f'{{"thing":{thing},"left_quantity":{left},"right_quantity":{right},'
        # Slices keep each pyarrow string array far below its 2 GB (int32 offsets) limit.
        for lo in range(0, len(sub), _SLICE):
            part = PairColumns(*(getattr(sub, f)[lo : lo + _SLICE] for f in ("pair",) + _COLS))
            ids = (
                pair_ids_hex(key, left_q, right_q, part.left_time, part.right_time)
                if with_id
                else None
            )
            if pa is not None:
                out.write(_arrow_lines(prefix, part, ids))
            else:
                out.write(_python_lines(prefix, part, ids).encode())
    return n


_SLICE = 1 << 20


_COLS = ("left_time", "left_value", "right_time", "right_value", "result", "event_time")


def _num_text(values: np.ndarray):
    """Float column as JSON text; non-finite numbers become null."""
    text = pc.cast(to_arrow(values), pa.string())
    finite = np.isfinite(values)
    if not finite.all():
        text = pc.if_else(to_arrow(finite), text, literal("null"))
    return text


def _fixed_width_strings(text: str, width: int):
    """A pyarrow string array over one ASCII string cut every ``width`` chars, built from
    buffers."""
    n = len(text) // width
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(),
        n,
        [None, pa.py_buffer(offsets), pa.py_buffer(text.encode("ascii"))],
    )


def _arrow_lines(prefix: str, c: PairColumns, ids: str | None) -> memoryview:
    left_t = pc.cast(to_arrow(c.left_time), pa.string())
    right_t = pc.cast(to_arrow(c.right_time), pa.string())
    pieces: list[object] = [
        literal(prefix + '"left_time":'),
        left_t,
        literal(',"right_time":'),
        right_t,
        literal(',"left_value":'),
        _num_text(c.left_value),
        literal(',"right_value":'),
        _num_text(c.right_value),
        literal(',"result":'),
        _num_text(c.result),
        literal(',"event_time":'),
        pc.if_else(
            to_arrow(c.left_time >= c.right_time), left_t, right_t
        ),  # event_time = the later one
    ]
    if ids is not None:
        pieces += [literal(',"id":"'), _fixed_width_strings(ids, 32), literal('"}\n')]
    else:
        pieces.append(literal("}\n"))
    lines = pc.binary_join_element_wise(*pieces, literal(""))
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    # A null-free string array's data buffer is exactly the concatenated lines.
    offsets = np.frombuffer(
        lines.buffers()[1], dtype=np.int32 if lines.type == pa.string() else np.int64
    )
    lo, hi = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    return memoryview(lines.buffers()[2])[lo:hi]


def _fmt(x: float) -> str:
    return repr(x) if math.isfinite(x) else "null"


def _python_lines(prefix: str, c: PairColumns, ids: str | None) -> str:
    out = []
    it = zip(
        c.left_time.tolist(),
        c.right_time.tolist(),
        c.left_value.tolist(),
        c.right_value.tolist(),
        c.result.tolist(),
        c.event_time.tolist(),
        strict=False,
    )
    for n, (lt, rt, lv, rv, res, ev) in enumerate(it):
        tail = f',"id":"{ids[32 * n : 32 * n + 32]}"' if ids is not None else ""
        out.append(
            f'{prefix}"left_time":{lt},"right_time":{rt},"left_value":{_fmt(lv)},"right_value":{_fmt(rv)},'
            f'"result":{_fmt(res)},"event_time":{ev}{tail}}}\n'
        )
    return "".join(out)
