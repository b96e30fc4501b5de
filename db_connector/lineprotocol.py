"""InfluxDB line protocol, written by hand.

influxdb-client's ``Point`` builds a dict and sorts it per point (~20 us); the connector writes
100k points/s from one Python thread, so lines are formatted directly. Tag values repeat (a
few thousand things and quantities), so their escaping is cached.
"""

from __future__ import annotations

import math
from functools import lru_cache

from db_connector.errors import PointError
from streamkit.identifiers import BAD_QUANTITY_NAME, BAD_THING, quantity_problem, thing_problem

NS_PER_MS = 1_000_000


_TAG_ESCAPES = str.maketrans({",": r"\,", "=": r"\=", " ": r"\ "})


@lru_cache(maxsize=65536)
def tag_value(value: str) -> str:
    """Escaped tag value. Empty values, newlines and trailing backslashes have no valid form
    (InfluxDB drops an empty tag and would merge series), so they are refused."""
    if not value:
        raise PointError("empty_tag", "a tag value is empty")
    if "\n" in value or "\r" in value or value.endswith("\\"):
        raise PointError(
            "invalid_tag", f"tag value {value[:100]!r} has a newline or ends with a backslash"
        )
    return value.translate(_TAG_ESCAPES)


@lru_cache(maxsize=65536)
def thing_tag(value: str) -> str:
    """A Thing as an escaped tag value. The connector reads records anyone with access to the
    topics could have written: a name the bridge would have refused (streamkit.identifiers) is
    refused here too (a dead letter with the bridge's reason), never made a tag or series."""
    problem = thing_problem(value)
    if problem is not None:
        raise PointError(BAD_THING, problem)
    return tag_value(value)


@lru_cache(maxsize=65536)
def quantity_tag(value: str) -> str:
    """A quantity name as an escaped tag value, refused like :func:`thing_tag`."""
    problem = quantity_problem(value)
    if problem is not None:
        raise PointError(BAD_QUANTITY_NAME, problem)
    return tag_value(value)


@lru_cache(maxsize=65536)
def pair_tag(left: str, right: str) -> str:
    """A joined pair's tag value ``<left>:<right>``, both quantity names refused like
    :func:`quantity_tag`."""
    for name in (left, right):
        problem = quantity_problem(name)
        if problem is not None:
            raise PointError(BAD_QUANTITY_NAME, problem)
    return tag_value(f"{left}:{right}")


def string_field(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def float_field(name: str, value: float) -> str:
    """InfluxDB has no NaN or infinity: such a value is refused with a reason, not written."""
    if not math.isfinite(value):
        raise PointError("non_finite_value", f"field {name} is {value}")
    return repr(float(value))


def line(measurement: str, tags: str, fields: str, time_ns: int) -> str:
    """``tags``: pre-escaped ``k=v,k=v`` in key order (InfluxDB indexes sorted tag keys fastest)."""
    return f"{measurement},{tags} {fields} {time_ns}"
