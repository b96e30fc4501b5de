"""python -m simulator: replay an events file over MQTT.

The file: JSON lines or one JSON array (also pretty-printed), UTF-8 with or without a
byte-order mark, LF or CRLF line ends, plain or gzip. Each valid row is published as JSON to
<prefix>/<Thing> with QoS 1 (with --shards N, for N sharded bridges:
<prefix>/<crc32(Thing) mod N>/<Thing>). Bad rows (not JSON, no Thing/Timestamp, non-numeric,
NaN or infinite quantities) are counted, reported with their line and reason at the end, and
never stop the replay. A file that cannot be replayed at all (missing, unreadable, not UTF-8,
neither JSON lines nor a JSON array, empty, no valid row) is refused before connecting: one
line on stderr, exit code 2.
"""

from __future__ import annotations

import json
import logging
import sys
import time

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import CounterMetricFamily
from tqdm import tqdm

from simulator.config import SimulatorSettings
from simulator.pacing import Pacer
from simulator.publisher import MqttPublisher
from streamkit.cli import entry_point
from streamkit.events_file import EventsFileError
from streamkit.events_source import EventsCheck, SourceStats, check_events, read_rows, sorted_rows
from streamkit.health import beat
from streamkit.service import run_service
from streamkit.shutdown import ShutdownFlag

REJECTED = Counter("simulator_rows_rejected_total", "bad lines skipped, by reason", ["reason"])


class Progress:
    """Rows handed to MQTT and rows the broker acknowledged, read when /metrics is scraped:
    exact at every scrape (a demo's status line and plot follow the replay second by second)
    at the cost of one integer update per row instead of a metric call on the hot path."""

    def __init__(self, publisher: MqttPublisher) -> None:
        self.publisher = publisher
        self.published = 0

    def collect(self) -> list[CounterMetricFamily]:
        published = CounterMetricFamily(
            "simulator_rows_published", "rows published over MQTT (QoS 1)"
        )
        published.add_metric([], self.published)
        acked = CounterMetricFamily(
            "simulator_rows_acked", "rows the MQTT broker acknowledged (PUBACK)"
        )
        acked.add_metric([], self.publisher.acked)
        return [published, acked]


def shifted(payload: bytes, timestamp_ms: int) -> bytes:
    """A row with another event time (loops after the first, live mode), written in
    milliseconds whatever unit the file used."""
    obj = json.loads(payload)
    obj["Timestamp"] = timestamp_ms
    return json.dumps(obj).encode()


def refusal(exc: EventsFileError) -> str:
    """The one line a refused file gets on stderr (the demo's test and the docs quote it)."""
    return f"python -m simulator: cannot replay {exc}"


@entry_point("simulator")
def main(argv: list[str] | None = None) -> int:
    """Exit 2 for a usage error or a refused file, 1 if not every row was acknowledged."""
    checked: list[EventsCheck] = []

    def check(settings: SimulatorSettings) -> None:
        settings.check()
        checked.append(check_events(settings.input_path))  # before logging, /metrics and MQTT

    try:
        return run_service(
            "simulator",
            SimulatorSettings,
            __doc__,
            argv,
            lambda settings, shutdown: replay(settings, shutdown, checked[0]),
            check=check,
        )
    except EventsFileError as exc:  # also one that changed under the replay
        print(refusal(exc), file=sys.stderr, flush=True)
        return 2


def replay(settings: SimulatorSettings, shutdown: ShutdownFlag, events: EventsCheck) -> int:
    """The replay itself, once start-up (logs, SIGTERM, /metrics) is done; 1 if not all acked."""
    log = logging.getLogger("simulator")
    path = settings.input_path
    try:
        publisher = MqttPublisher(
            settings,
            settings.connections,
            settings.max_inflight,
            shards=settings.shards,
            reach_timeout=settings.reach_timeout,
        )
    except OSError as exc:  # refused, unreachable, no such host: one line, no traceback
        print(
            f"python -m simulator: cannot connect to MQTT at "
            f"{settings.mqtt_host}:{settings.mqtt_port}: {exc}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    pacer = Pacer(rows_per_s=settings.rate, speed_factor=settings.speed)
    total_lines = events.rows_in_file
    stats = SourceStats()
    progress = Progress(publisher)
    REGISTRY.register(progress)
    published = 0
    started = time.perf_counter()
    loop = 0
    shift_ms = 0
    span: tuple[int, int] | None = None
    live_stamps: dict[str, int] = {}
    bar = tqdm(
        total=total_lines * (settings.loops or 1) if settings.loops else None,
        unit="row",
        disable=not settings.progress,
        file=sys.stderr,
        mininterval=0.5,
    )
    last_status = started
    try:
        while not shutdown.requested and (settings.loops == 0 or loop < settings.loops):
            stats = SourceStats()
            rows = read_rows(path, stats)
            if settings.order == "event-time":
                rows = sorted_rows(rows, settings.sort_chunk_rows)
            low, high = None, None
            for row in rows:
                if shutdown.requested:
                    break
                pacer.wait(row.timestamp_ms)
                if settings.live:
                    stamp = live_stamps[row.thing] = max(
                        int(time.time() * 1000), live_stamps.get(row.thing, 0) + 1
                    )
                    payload = shifted(row.payload, stamp)
                else:
                    payload = (
                        shifted(row.payload, row.timestamp_ms + shift_ms)
                        if shift_ms
                        else row.payload
                    )
                publisher.publish(row.thing, payload)
                published += 1
                progress.published = published
                low = row.timestamp_ms if low is None else min(low, row.timestamp_ms)
                high = row.timestamp_ms if high is None else max(high, row.timestamp_ms)
                if published % 2000 == 0:
                    bar.update(2000)
                    beat()
                    if not settings.progress and time.perf_counter() - last_status > 5:
                        last_status = time.perf_counter()
                        log.info(
                            "progress",
                            extra={
                                "published": published,
                                "rows_per_s": round(published / (last_status - started)),
                            },
                        )
            if low is not None and high is not None:  # else no row this loop: the last span
                span = (low, high)
            loop += 1
            if settings.shift_per_loop and span:
                shift_ms += span[1] - span[0] + 1000
        bar.update(published - bar.n)
        for reason, count in stats.rejected.items():
            REJECTED.labels(reason).inc(count)
        all_acked = publisher.wait_all_acked(published)
    finally:
        bar.close()
        publisher.close()
    elapsed = time.perf_counter() - started
    summary = {
        "rows_published": published,
        "rows_acked": publisher.acked,
        "loops": loop,
        "seconds": round(elapsed, 3),
        "rows_per_s": round(published / elapsed) if elapsed else 0,
        "rows_rejected": stats.rejected_total,
        "rejected_by_reason": dict(stats.rejected),
        "rejected_examples": stats.examples,
        "rejected_rows": stats.listed,
        "stopped_early": shutdown.requested,
    }
    print(json.dumps(summary, indent=2), flush=True)
    shutdown.wait(settings.linger.total_seconds())
    return 0 if all_acked else 1


if __name__ == "__main__":
    sys.exit(main())
