"""The window label: part of an aggregate's Kafka key and its ``window`` tag in InfluxDB
(docs/influxdb-schema.md), which dashboards select by. One function so that the aggregate job
and the connector cannot drift apart (they did: the connector wrote ``sliding-<size>`` for a
sliding window whose slide equals its size, the job ``sliding-<size>-<slide>``)."""

from __future__ import annotations

from typing import NamedTuple

KINDS = ("tumbling", "sliding", "session")


class WindowLabel(NamedTuple):
    kind: str
    size_ms: int
    slide_ms: int


def window_label(kind: str, size_ms: int, slide_ms: int) -> str:
    """``tumbling-<size>``, ``sliding-<size>-<slide>`` or ``session-<gap>``: the slide only
    where it is not the size by definition (tumbling: slide = size; session: both the gap)."""
    return f"{kind}-{size_ms}-{slide_ms}" if kind == "sliding" else f"{kind}-{size_ms}"


def parse_window_label(label: str) -> WindowLabel:
    """Inverse of :func:`window_label`; ValueError for anything else."""
    kind, _, numbers = label.partition("-")
    texts = numbers.split("-")
    if (
        kind not in KINDS
        or len(texts) != (2 if kind == "sliding" else 1)
        or not all(t.isdigit() for t in texts)
    ):
        raise ValueError(f"not a window label: {label!r}")
    parts = [int(t) for t in texts]
    return WindowLabel(kind, parts[0], parts[-1])
