"""numpy <-> pyarrow conversions that go through raw buffers.

``Array.to_numpy()`` and ``pa.array(ndarray)`` import pandas on first use
(~0.4 s), which is most of the CLI's start-up budget; the buffer route does
not.  Only the simple cases the CLI needs: fixed-width numbers and booleans.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def _single(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def values(col: pa.Array | pa.ChunkedArray, dtype: type) -> np.ndarray:
    """The value slots of a numeric column (whatever sits in null slots: check :func:`valid`)."""
    arr = _single(col)
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None or n == 0:
        return np.zeros(n, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=n, offset=arr.offset * np.dtype(dtype).itemsize)


def valid(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Boolean mask of non-null slots."""
    arr = _single(col)
    n = len(arr)
    bitmap = arr.buffers()[0]
    if bitmap is None or arr.null_count == 0:
        return np.ones(n, dtype=bool)
    bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")
    return bits[arr.offset : arr.offset + n].astype(bool)


def to_arrow(a: np.ndarray) -> pa.Array:
    """A contiguous numeric/bool ndarray as a null-free pyarrow array."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        packed = np.packbits(a, bitorder="little")
        return pa.Array.from_buffers(pa.bool_(), len(a), [None, pa.py_buffer(packed)])
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])


def literal(text: str) -> pa.StringScalar:
    """A string scalar (``pa.scalar(str)`` would import pandas)."""
    data = text.encode()
    offsets = np.array([0, len(data)], dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])[
        0
    ]
