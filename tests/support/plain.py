"""Outputs and states as plain, comparable values: bit-exact floats (NaN equal to NaN), numpy
arrays with their dtype, dataclasses by their fields."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, plain(value.tolist()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (
            type(value).__name__,
            tuple((f.name, plain(getattr(value, f.name))) for f in dataclasses.fields(value)),
        )
    if isinstance(value, dict):
        return ("dict", tuple((plain(k), plain(v)) for k, v in sorted(value.items())))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(plain(v) for v in value))
    if isinstance(value, (float, np.floating)):
        return ("float", float(value).hex())
    if isinstance(value, np.integer):
        return int(value)
    return value
