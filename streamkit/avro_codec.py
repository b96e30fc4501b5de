"""Avro encoding shared by the bridge (writer), the Spark jobs (spark-avro reads the same .avsc)
and the connector. Plain Avro binary, no registry header: that is what ``from_avro`` expects."""
from __future__ import annotations

import io
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import fastavro

from streamkit.paths import SCHEMA_DIR


@lru_cache(maxsize=None)
def schema_text(name: str) -> str:
    """The .avsc as text: spark-avro takes the JSON string, fastavro the parsed form."""
    return (SCHEMA_DIR / f"{name}.avsc").read_text()


@lru_cache(maxsize=None)
def parsed_schema(name: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_text(name)))


class AvroCodec:
    """Encoder/decoder for one schema; reuses one buffer because encoding sits on hot paths."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._schema = parsed_schema(name)
        self._buffer = io.BytesIO()

    def encode(self, record: dict[str, Any]) -> bytes:
        buffer = self._buffer
        buffer.seek(0)
        buffer.truncate()
        fastavro.schemaless_writer(buffer, self._schema, record)
        return buffer.getvalue()

    def decode(self, payload: bytes) -> dict[str, Any]:
        return fastavro.schemaless_reader(io.BytesIO(payload), self._schema, None)


def schema_path(name: str) -> Path:
    return SCHEMA_DIR / f"{name}.avsc"
