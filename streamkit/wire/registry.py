"""Confluent's wire format and the schema registry it points into, used when SCHEMA_REGISTRY is on.

Each value is then a magic byte 0, the schema's registry id (4 bytes, big-endian) and the Avro
body as without a registry, so any registry-aware tool (kcat, Kafka Connect, consoles) decodes
our topics by asking the registry only. Each topic's schema lives under the subject
``<topic>-value`` (the TopicNameStrategy those tools assume) with the BACKWARD rule: a changed
.avsc that cannot read the records already written is refused when a producer starts, before it
writes anything. With the setting off, :func:`header` is empty and the bytes are unchanged.
Plain urllib: a handful of REST calls at start-up need no client library.
"""

from __future__ import annotations

import json
import ssl
import struct
import urllib.error
import urllib.request
from typing import Any

from streamkit.errors import StackError
from streamkit.tls import client_context
from streamkit.wire.avro import schema_text

MAGIC = 0
_HEADER = struct.Struct(">bI")
HEADER_SIZE = _HEADER.size
COMPATIBILITY = "BACKWARD"
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

#: The topic setting of each schema the services write.
TOPIC_SCHEMAS = {
    "raw_topic": "measurement",
    "joined_topic": "joined",
    "aggregates_topic": "aggregate",
    "late_topic": "late",
    "opstats_topic": "opstats",
    "overloads_topic": "overload",
}


class RegistryError(StackError):
    """The registry could not be reached or answered with an error."""


class IncompatibleSchema(RegistryError):
    """A schema the registry refused under the subject's compatibility rule."""


def subject(topic: str) -> str:
    return f"{topic}-value"


def frame(schema_id: int) -> bytes:
    """The 5 bytes that open every value written with schema ``schema_id``."""
    return _HEADER.pack(MAGIC, schema_id)


def unframe(value: bytes) -> tuple[int, bytes]:
    """(schema id, Avro body) of a framed value; ValueError when it is not framed."""
    if len(value) < HEADER_SIZE or value[0] != MAGIC:
        raise ValueError("no schema registry header (magic byte 0, schema id)")
    magic, schema_id = _HEADER.unpack_from(value)
    return schema_id, value[HEADER_SIZE:]


class RegistryClient:
    """The few calls of the Confluent-compatible API the producers need."""

    def __init__(self, settings: Any, timeout_s: float = 10.0) -> None:
        self.url: str = settings.registry_url
        self.timeout_s = timeout_s
        self._context: ssl.SSLContext | None = (
            client_context(settings) if self.url.startswith("https:") else None
        )

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, parsed JSON answer) of one call; RegistryError when nothing answered."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        request.add_header("Content-Type", _CONTENT_TYPE)
        request.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(
                request, timeout=self.timeout_s, context=self._context
            ) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            raise RegistryError(f"schema registry at {self.url} unreachable: {exc}") from None
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def register(self, subject_name: str, schema: str) -> int:
        """The id of ``schema`` under ``subject_name``, registered now unless it already is, with
        the subject's rule set to BACKWARD first so that the registry judges every change."""
        status, answer = self.call(
            "PUT", f"/config/{subject_name}", {"compatibility": COMPATIBILITY}
        )
        if status != 200:
            raise RegistryError(f"subject {subject_name}: setting {COMPATIBILITY}: {answer}")
        status, answer = self.call("POST", f"/subjects/{subject_name}/versions", {"schema": schema})
        if status == 409:
            raise IncompatibleSchema(
                f"schema registry refused the schema of subject {subject_name}: it is not "
                f"{COMPATIBILITY}-compatible with the registered versions (records already "
                f"written could not be read with it): {_message(answer)}. Make the change "
                "compatible (e.g. a new field with a default) or write to a new topic"
            )
        if status != 200 or not isinstance(answer, dict) or "id" not in answer:
            raise RegistryError(f"subject {subject_name}: registering failed ({status}): {answer}")
        return int(answer["id"])


def _message(answer: Any) -> str:
    return str(answer.get("message", answer)) if isinstance(answer, dict) else str(answer)


def register_all(settings: Any) -> dict[str, int]:
    """topic -> schema id for every topic the services write, each registered under its subject
    (idempotent: an unchanged schema keeps its id)."""
    client = RegistryClient(settings)
    return {
        getattr(settings, field): client.register(
            subject(getattr(settings, field)), schema_text(name)
        )
        for field, name in TOPIC_SCHEMAS.items()
    }


def header(settings: Any, topic: str, schema: str) -> bytes:
    """What opens each value written to ``topic`` with ``schema``: the registry header, the
    schema registered first; empty with SCHEMA_REGISTRY off (today's plain Avro)."""
    if not settings.schema_registry:
        return b""
    return frame(RegistryClient(settings).register(subject(topic), schema_text(schema)))
