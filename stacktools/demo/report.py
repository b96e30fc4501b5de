"""The demo's results: what landed in InfluxDB, how fast each stage went, and how long an event
took to reach InfluxDB (from the connector's latency histograms)."""

from __future__ import annotations

import math

from stacktools.demo import operation
from stacktools.demo.histograms import histogram_buckets, percentile
from stacktools.demo.latency import latency_metric
from stacktools.demo.sampler import Samples
from stacktools.harness.scrape import metric_sum
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.wire.retention import source

#: One field every point of the measurement has: counting it counts the points.
COUNTED_FIELD = {
    "raw": "value",
    "joined": "result",
    "aggregate": "mean",
    "late": "value",
    "opstats": "duty_pct",
    "dead_letter": "bytes",
}


def influx_counts(settings: Settings, database: str) -> dict[str, int]:
    influx = InfluxClient(settings)
    counts = {}
    for measurement, field_name in COUNTED_FIELD.items():
        status, body = influx.query(
            f'SELECT count("{field_name}") FROM {source(measurement)}', database=database
        )
        series = body.get("results", [{}])[0].get("series", []) if status == 200 else []
        counts[measurement] = int(series[0]["values"][0][1]) if series else 0
    return counts


def latency(connector_metrics: dict[str, float], live: bool) -> dict[str, float | None | str]:
    """Event -> InfluxDB for live replays (event time = publish time); otherwise the part that
    does not depend on the file's timestamps: bridge's Kafka write -> InfluxDB."""
    buckets = histogram_buckets(connector_metrics, latency_metric(live), 'measurement="raw"')
    return {
        "measured": "event time -> InfluxDB ack (raw points)"
        if live
        else "bridge's Kafka write -> InfluxDB ack (raw points)",
        "p50_s": percentile(buckets, 0.5),
        "p99_s": percentile(buckets, 0.99),
    }


def summary(
    settings: Settings,
    database: str,
    samples: Samples,
    metrics: dict[str, dict[str, float]],
    rows_in_file: int,
    elapsed_s: float,
    live: bool,
) -> dict:
    counts = influx_counts(settings, database)
    bridge = metrics.get("mqtt_bridge", {})
    return {
        "rows_in_file": rows_in_file,
        "rows_published": int(samples.latest("simulator rows")),
        "raw_records": int(samples.latest("bridge records")),
        "dead_lettered_by_bridge": int(metric_sum(bridge, "bridge_dlq_total")),
        "influxdb_points": counts,
        "peak_rates_per_s": {name: round(samples.peak_rate(name)) for name in samples.counters},
        "latency": latency(metrics.get("db_connector", {}), live),
        "elapsed_s": round(elapsed_s, 1),
    }


def rejected(simulator: dict) -> dict:
    """The rows the simulator rejected, from its summary: the exact count, by reason, and the
    first of them (the simulator lists at most streamkit.events_source.LISTED_REJECTIONS) with their
    lines."""
    rows = simulator.get("rejected_rows", [])
    return {
        "count": int(simulator.get("rows_rejected", 0)),
        "by_reason": simulator.get("rejected_by_reason", {}),
        "rows": [
            {"line": r.get("line"), "reason": r.get("reason"), "detail": r.get("detail")}
            for r in rows
        ],
    }


def rejected_line(result: dict) -> str | None:
    """The summary's line on rejected rows; None when there are none."""
    info = result.get("rejected", {})
    if not info.get("count"):
        return None
    reasons = ", ".join(
        f"{reason} {count:,}" for reason, count in info.get("by_reason", {}).items()
    )
    lines = ", ".join(str(r["line"]) for r in info.get("rows", [])[:5])
    more = " ..." if info["count"] > min(5, len(info.get("rows", []))) else ""
    word = "line" if len(info.get("rows", [])) == 1 else "lines"
    return (
        f"rows rejected         {info['count']:>12,}  "
        f"({reasons}; {word} {lines}{more}: see summary.json)"
    )


def verify_line(result: dict) -> str | None:
    """The verdict of stacktools.verify in one line (its details follow the plots)."""
    verdict = result.get("verify")
    if not verdict:
        return None
    if "skipped" in verdict:
        return f"verify                {verdict['skipped']}"
    if verdict["exact"]:
        return "verify                exact (InfluxDB holds exactly what the file implies)"
    wrong = [m["measurement"] for m in verdict["measurements"] if not m["exact"]]
    return f"verify                DIFFERENT in {', '.join(wrong)} (see below)"


def render(result: dict) -> str:
    counts = result["influxdb_points"]
    lat = result["latency"]

    def seconds(value: float | None) -> str:
        return "n/a" if value is None else (">300 s" if math.isinf(value) else f"{value:.2f} s")

    lines = [
        f"rows in file          {result['rows_in_file']:>12,}",
        f"rows published        {result['rows_published']:>12,}",
        *filter(None, [rejected_line(result)]),
        f"raw records (Kafka)   {result['raw_records']:>12,}",
        f"raw points (InfluxDB) {counts['raw']:>12,}",
        f"joined pairs          {counts['joined']:>12,}",
        f"windows               {counts['aggregate']:>12,}",
        f"late records          {counts['late']:>12,}",
        f"operation cycles      {counts.get('opstats', 0):>12,}",
        *operation.lines(result.get("operation_statistics", {})),
        *filter(None, [operation.alerts_line(result)]),
        f"dead letters          {counts['dead_letter']:>12,}",
        *filter(None, [verify_line(result)]),
        "peak rate per stage:  "
        + ", ".join(f"{k} {v:,}/s" for k, v in result["peak_rates_per_s"].items()),
        f"latency ({lat['measured']}): p50 {seconds(lat['p50_s'])}, p99 {seconds(lat['p99_s'])}",
        f"elapsed               {result['elapsed_s']:>10} s",
    ]
    return "\n".join(lines)
