"""Typed, empty output columns for the jobs' state functions.

A state function's frame must give every column the type Spark declares for it: a string
column holding nothing but NaN reaches Arrow as float and fails the batch. Unused cells are
filler (null strings, 0 longs, NaN doubles, which Spark reads as null).
"""
from __future__ import annotations

import numpy as np

#: (name, Spark type) of every output column, as in the job's DDL schema
Fields = list[tuple[str, str]]


def typed_columns(fields: Fields, rows: int) -> dict[str, np.ndarray]:
    """One filler array per field, of its Spark type ("string", "long", "double" or "binary")."""
    filler = {"string": lambda: np.full(rows, None, dtype=object), "long": lambda: np.zeros(rows, dtype=np.int64),
              "double": lambda: np.full(rows, np.nan), "binary": lambda: np.full(rows, None, dtype=object)}
    return {name: filler[kind]() for name, kind in fields}
