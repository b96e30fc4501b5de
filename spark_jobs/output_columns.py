"""Typed output columns for the jobs' state functions, gathered in chunks and made a frame once.

A state function's frame must give every column the type Spark declares for it: a string
column holding nothing but NaN reaches Arrow as float and fails the batch. Unused cells are
filler (null strings, 0 longs, NaN doubles, which Spark reads as null).

Building a pandas frame costs far more than the numpy work behind a key's rows, and a state
function emits several kinds of rows per key (pairs, windows, late records) for several keys
(the single pass: every quantity of a thing). So the kinds add numpy chunks to one
:class:`OutputRows`, and the frame is built once per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from operators import Records

if TYPE_CHECKING:
    import pandas as pd

#: (name, Spark type) of every output column, as in the job's DDL schema
Fields = list[tuple[str, str]]

_DTYPES = {"string": object, "binary": object, "long": np.int64, "double": np.float64}
_FILLERS = {"string": None, "binary": None, "long": 0, "double": np.nan}


class OutputRows:
    """Rows of one state function call, as chunks of columns (arrays of the chunk's length, or
    one value for the whole chunk; missing columns are filler). ``nullable`` long columns take
    floats with NaN for null (exact for millisecond times) and reach Spark as nullable longs."""

    def __init__(self, fields: Fields, nullable: frozenset[str] = frozenset()) -> None:
        self.fields = fields
        self.nullable = nullable
        self.chunks: list[tuple[int, dict[str, Any]]] = []

    def add(self, rows: int, **columns: Any) -> None:
        if rows:
            self.chunks.append((rows, columns))

    def __len__(self) -> int:
        return sum(rows for rows, _ in self.chunks)

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        data = {}
        for name, kind in self.fields:
            values = self._column(self.chunks, name, kind)
            if name in self.nullable:
                missing = np.isnan(values)
                data[name] = pd.arrays.IntegerArray(
                    np.where(missing, 0, values).astype(np.int64), missing
                )
            else:
                data[name] = values
        return pd.DataFrame(data)

    def columns(self, record_type: str, names: list[str]) -> dict[str, np.ndarray]:
        """The columns ``names`` of the rows of ``record_type`` only, each one array (nullable
        longs and doubles as float64 with NaN for null), for writers that encode outputs
        themselves instead of building a frame for Spark."""
        chunks = [(n, c) for n, c in self.chunks if c.get("record_type") == record_type]
        kinds = dict(self.fields)
        return {name: self._column(chunks, name, kinds[name]) for name in names}

    def _column(self, chunks: list[tuple[int, dict[str, Any]]], name: str, kind: str) -> Any:
        """One column over ``chunks``: filler where a chunk has none; a nullable one as
        float64 with NaN for null."""
        nullable = name in self.nullable
        dtype = np.float64 if nullable else _DTYPES[kind]
        filler = np.nan if nullable else _FILLERS[kind]
        return np.concatenate(
            [self._part(rows, columns.get(name, filler), dtype) for rows, columns in chunks]
            or [np.empty(0, dtype)]
        )

    def count(self, record_type: str) -> int:
        return sum(n for n, c in self.chunks if c.get("record_type") == record_type)

    @staticmethod
    def _part(rows: int, value: Any, dtype: Any) -> np.ndarray:
        if isinstance(value, (np.ndarray, list)):
            return np.asarray(value, dtype=dtype)
        return np.full(rows, value, dtype=dtype)


#: Adds what the operator emitted for ``key`` (from the records ``batch``; empty for a timer)
#: to the output rows, with the ``tags`` columns.
Render = Callable[[OutputRows, tuple, Records, Any, dict[str, Any]], None]
