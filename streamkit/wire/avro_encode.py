"""Many Avro records of one flat schema encoded at once from columns.

The Spark single pass with its state in the driver renders a batch's outputs as columns
(joined pairs, windows, late records) and produces them itself; encoding them one dict at a time
would cost more than computing them. :class:`ColumnEncoder` takes a batch's columns and returns
each row's Avro bytes, byte-identical to the wire contract's writer (:class:`AvroCodec`; tested),
optionally opened by the schema registry's header. The schemas' types are strings, longs,
doubles and ``[null, long|double]`` unions; a union's null is a NaN in its float64 column, as
the jobs' output rows mark it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from streamkit.wire.avro import AvroCodec, schema_text


class ColumnEncoder:
    """Encoder of one schema (``streamkit/wire/schemas/<name>.avsc``) over columns."""

    def __init__(self, schema_name: str) -> None:
        self.schema_name = schema_name
        self.fields: list[tuple[str, Any]] = [
            (f["name"], f["type"]) for f in json.loads(schema_text(schema_name))["fields"]
        ]
        self._codec = AvroCodec(schema_name)

    def encode(self, columns: Mapping[str, Any], rows: int, prefix: bytes = b"") -> list[bytes]:
        """Each row's value: ``prefix`` then the Avro record of the row's fields. A column is a
        numpy array (object for strings, int64 for longs, float64 for doubles and unions) or
        one value for every row."""
        values = {
            name: (
                columns[name]
                if isinstance(columns[name], np.ndarray)
                else np.full(rows, columns[name], dtype=object)
            )
            for name, _ in self.fields
        }
        out = []
        for row in range(rows):
            record: dict[str, Any] = {}
            for name, kind in self.fields:
                value = values[name][row]
                if isinstance(kind, list):  # ["null", "long" | "double"]
                    if value is None or (isinstance(value, float) and math.isnan(value)):
                        value = None
                    elif "long" in kind:
                        value = int(value)
                    else:
                        value = float(value)
                elif kind == "long":
                    value = int(value)
                elif kind == "double":
                    value = float(value)
                record[name] = value
            out.append(prefix + self._codec.encode(record))
        return out
