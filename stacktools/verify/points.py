"""What a run's output and the expectation are compared as: the measurements, each one's
identity of a record (its keys) and its compared values (docs/influxdb-schema.md)."""

from __future__ import annotations

NS_PER_MS = 1_000_000
MEASUREMENTS = ("raw", "joined", "aggregate", "late")
#: The operation statistics' measurements, compared when OPSTATS_POWER is set.
STATS_MEASUREMENTS = ("opstats", "opstats_band", "overload")
#: Each measurement's identity of a record: two points with the same one are the same record.
KEYS = {
    "raw": ["thing", "quantity", "time_ms"],
    "joined": ["thing", "pair", "left_time_ms", "right_time_ms"],
    "aggregate": ["thing", "quantity", "window", "start_ms"],
    "late": ["thing", "quantity", "stage", "reason", "time_ms"],
    "opstats": ["thing", "component", "rating", "start_ms"],
    "opstats_band": ["thing", "component", "rating", "band", "start_ms"],
    "overload": ["thing", "component", "rating", "status", "start_ms"],
}
#: Tags that are values rather than part of the identity (compared as text).
TEXT_VALUES = ("result_name", "component", "power", "why")
#: The compared values of each measurement (fields, the tags outside the identity, the time).
VALUES = {
    "raw": ["time_ns", "value"],
    "joined": [
        "time_ns",
        "result_name",
        "component",
        "long_gap_ms",
        "result",
        "left_value",
        "right_value",
    ],
    "aggregate": [
        "time_ns",
        "count",
        "mean",
        "min",
        "max",
        "stddev",
        "window_end_ms",
        "duration_ms",
        "closed_at_ms",
    ],
    "late": ["time_ns", "value", "watermark_ms", "count"],
    "opstats": [
        "time_ns",
        "power",
        "duty_pct",
        "duty_rating_pct",
        "motoring_kwh",
        "regenerative_kwh",
        "energy_kwh",
        "mean_w",
        "mean_pct",
        "peak_w",
        "peak_pct",
        "rated_power_kw",
        "data_s",
        "no_data_s",
        "overload_s",
        "duty_exceeded",
        "rating_defaulted",
        "cycle_ms",
    ],
    "opstats_band": ["time_ns", "seconds", "cumulative_hours", "share_pct"],
    "overload": [
        "time_ns",
        "duty_pct",
        "duty_rating_pct",
        "peak_pct",
        "overload_s",
        "since_ms",
        "cycle_end_ms",
        "why",
    ],
}
