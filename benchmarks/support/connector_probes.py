"""What benchmarks/bench_connector.py observes a loader by, from outside it: a process's CPU
and run-queue wait from /proc, influxd's pid, the connector's /metrics and InfluxDB's count of
the points loaded."""

from __future__ import annotations

import os
import urllib.request
from pathlib import Path

from stacktools.stack import Stack
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.wire.retention import source

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None) -> float | None:
    """utime + stime of one process (threads included), from /proc."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def runqueue_seconds(pid: int) -> float | None:
    """Time the process' threads were runnable but waiting for a CPU (schedstat field 2):
    how much a loaded machine starved it."""
    try:
        return (
            sum(
                int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[1])
                for task in os.listdir(f"/proc/{pid}/task")
            )
            / 1e9
        )
    except (OSError, IndexError, ValueError):
        return None


def influxd_pid(settings: Settings) -> int | None:
    return next(
        (s.pid for s in Stack(settings, ["influxdb"]).status() if s.name == "influxdb"), None
    )


def scrape(port: int) -> dict[str, float]:
    """The connector's points written, and its batch histogram's sum and count."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    out = {"points": 0.0, "batch_sum": 0.0, "batch_count": 0.0}
    for line in text.splitlines():
        if line.startswith("connector_points_written_total{"):
            out["points"] += float(line.rsplit(" ", 1)[1])
        elif line.startswith("connector_batch_seconds_sum "):
            out["batch_sum"] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("connector_batch_seconds_count "):
            out["batch_count"] = float(line.rsplit(" ", 1)[1])
    return out


def count_points(settings: Settings, database: str) -> int:
    rows = InfluxClient(settings).rows(database, f'SELECT count("value") FROM {source("raw")}')
    return int(rows[0]["count"]) if rows else 0
