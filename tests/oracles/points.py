"""The InfluxDB points the connector must write for the pipeline's records, from the table in
docs/influxdb-schema.md (not from db_connector): one point per distinct (measurement, tag set,
time), a record written twice landing on its own point again.

A point here is ``(measurement, tags, time ns) -> fields``, tags a sorted tuple of (name, value)
with the absent ones left out, fields a dict without the absent (null) ones.
"""

from __future__ import annotations

from tests.oracles.pipeline import Outputs
from tests.oracles.windows import Spec

Identity = tuple[str, tuple[tuple[str, str], ...], int]
NS_PER_MS = 1_000_000
#: Joined points of one millisecond are told apart by 2 * |gap| + (later side) nanoseconds,
#: which fits below a millisecond for gaps under 500 s; longer gaps get a tag instead.
LONGEST_DISCRIMINATED_GAP_MS = 499_999


def identity(measurement: str, time_ns: int, **tags: object) -> Identity:
    return (
        measurement,
        tuple(sorted((k, str(v)) for k, v in tags.items() if v is not None)),
        time_ns,
    )


def present(**fields: object) -> dict:
    return {k: v for k, v in fields.items() if v is not None}


def joined_point(r: dict) -> tuple[Identity, dict]:
    left, right = r["left_time_ms"], r["right_time_ms"]
    gap = abs(left - right)
    long_gap = right - left if gap > LONGEST_DISCRIMINATED_GAP_MS else None
    discriminator = 0 if long_gap is not None else 2 * gap + (1 if right > left else 0)
    return (
        identity(
            "joined",
            max(left, right) * NS_PER_MS + discriminator,
            thing=r["thing"],
            pair=f"{r['left_quantity']}:{r['right_quantity']}",
            result_name=r["result_name"],
            component=r.get("component") or None,
            long_gap_ms=long_gap,
        ),
        present(
            result=r["result"],
            left_value=r["left_value"],
            right_value=r["right_value"],
            left_time_ms=left,
            right_time_ms=right,
        ),
    )


def aggregate_point(r: dict) -> tuple[Identity, dict]:
    session = r["window_kind"] == "session"
    return (
        identity(
            "aggregate",
            r["window_start_ms"] * NS_PER_MS,
            thing=r["thing"],
            quantity=r["quantity"],
            window=Spec(r["window_kind"], r["window_size_ms"], r["window_slide_ms"]).label,
        ),
        present(
            count=r["count"],
            mean=r["mean"],
            min=r["min"],
            max=r["max"],
            stddev=r["stddev"],
            window_end_ms=r["window_end_ms"],
            closed_at_ms=r["closed_at_ms"],
            duration_ms=r["window_end_ms"] - r["window_start_ms"] if session else None,
        ),
    )


def late_point(r: dict) -> tuple[Identity, dict]:
    return (
        identity(
            "late",
            r["event_time_ms"] * NS_PER_MS,
            thing=r["thing"],
            quantity=r["quantity"],
            stage=r["stage"],
            reason=r["reason"],
        ),
        present(value=r["value"], watermark_ms=r["watermark_ms"], count=1),
    )


def raw_point(r: dict) -> tuple[Identity, dict]:
    return (
        identity("raw", r["event_time_ms"] * NS_PER_MS, thing=r["thing"], quantity=r["quantity"]),
        {"value": r["value"]},
    )


def expected_points(outputs: Outputs) -> dict[Identity, dict]:
    """What InfluxDB must hold; of several records on one point, the last written stands (the
    oracle's records of one point agree wherever the pipeline's outputs are deterministic)."""
    points: dict[Identity, dict] = {}
    for convert, records in (
        (raw_point, outputs.raw),
        (joined_point, outputs.joined),
        (aggregate_point, outputs.aggregates),
        (late_point, outputs.late),
    ):
        points.update(convert(r) for r in records)
    return points
