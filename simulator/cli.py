"""python -m simulator: replay an events.json file over MQTT.

Each valid row is published as JSON to <prefix>/<Thing> with QoS 1. Bad lines (not JSON, no
Thing/Timestamp, non-numeric, NaN or infinite quantities) are counted, reported with their
reasons at the end, and never stop the replay.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from prometheus_client import REGISTRY, Counter
from prometheus_client.core import CounterMetricFamily
from tqdm import tqdm

from simulator.pacing import Pacer
from simulator.publisher import MqttPublisher
from simulator.config import SimulatorSettings
from simulator.source import SourceStats, read_rows, sorted_rows
from streamkit.health import beat
from streamkit.logs import setup_logging
from streamkit.metrics import serve_metrics
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
        published = CounterMetricFamily("simulator_rows_published", "rows published over MQTT (QoS 1)")
        published.add_metric([], self.published)
        acked = CounterMetricFamily("simulator_rows_acked", "rows the MQTT broker acknowledged (PUBACK)")
        acked.add_metric([], self.publisher.acked)
        return [published, acked]


def count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def shifted(payload: bytes, timestamp_ms: int) -> bytes:
    """A row with another event time (loops after the first, live mode), written in
    milliseconds whatever unit the file used."""
    obj = json.loads(payload)
    obj["Timestamp"] = timestamp_ms
    return json.dumps(obj).encode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", type=Path, required=True, help="events.json (JSON lines)")
    pace = parser.add_mutually_exclusive_group()
    pace.add_argument("--rate", type=float, default=0.0, help="fixed rows per second (default: as fast as possible)")
    pace.add_argument("--speed", type=float, default=0.0, help="replay event time N times faster than real time")
    parser.add_argument("--order", choices=["event-time", "file"], default="event-time",
                        help="event-time (default; sorts, spilling to disk for big files) or file order")
    parser.add_argument("--loops", type=int, default=1, help="replay the file this many times (0: until stopped)")
    parser.add_argument("--shift-per-loop", action="store_true",
                        help="move each further loop's event time past the previous loop's (new data, not a replay)")
    parser.add_argument("--live", action="store_true",
                        help="stamp each row with the wall clock when it is published (strictly increasing per "
                             "Thing), so the replay looks like live machines: event-to-dashboard latency is then "
                             "measurable")
    parser.add_argument("--sort-chunk-rows", type=int, default=500_000, help="rows sorted in memory before spilling")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (periodic status lines instead)")
    settings, args = SimulatorSettings.parse(argv, parser=parser)
    log = setup_logging(settings.log_level, service="simulator")
    if not args.input.is_file():
        parser.error(f"--input {args.input} is not a file")
    shutdown = ShutdownFlag().install()
    serve_metrics("simulator", settings)

    publisher = MqttPublisher(settings, settings.connections, settings.max_inflight)
    pacer = Pacer(rows_per_s=args.rate, speed_factor=args.speed)
    total_lines = count_lines(args.input)
    stats = SourceStats()
    progress = Progress(publisher)
    REGISTRY.register(progress)
    published = 0
    started = time.perf_counter()
    loop = 0
    shift_ms = 0
    span: tuple[int, int] | None = None
    live_stamps: dict[str, int] = {}
    bar = tqdm(total=total_lines * (args.loops or 1) if args.loops else None, unit="row", disable=args.no_progress,
               file=sys.stderr, mininterval=0.5)
    last_status = started
    try:
        while not shutdown.requested and (args.loops == 0 or loop < args.loops):
            stats = SourceStats()
            rows = read_rows(args.input, stats)
            if args.order == "event-time":
                rows = sorted_rows(rows, args.sort_chunk_rows)
            low, high = None, None
            for row in rows:
                if shutdown.requested:
                    break
                pacer.wait(row.timestamp_ms)
                if args.live:
                    stamp = live_stamps[row.thing] = max(int(time.time() * 1000), live_stamps.get(row.thing, 0) + 1)
                    payload = shifted(row.payload, stamp)
                else:
                    payload = shifted(row.payload, row.timestamp_ms + shift_ms) if shift_ms else row.payload
                publisher.publish(row.thing, payload)
                published += 1
                progress.published = published
                low = row.timestamp_ms if low is None else min(low, row.timestamp_ms)
                high = row.timestamp_ms if high is None else max(high, row.timestamp_ms)
                if published % 2000 == 0:
                    bar.update(2000)
                    beat()
                    if args.no_progress and time.perf_counter() - last_status > 5:
                        last_status = time.perf_counter()
                        log.info("progress", extra={"published": published,
                                                    "rows_per_s": round(published / (last_status - started))})
            span = (low, high) if low is not None else span
            loop += 1
            if args.shift_per_loop and span:
                shift_ms += span[1] - span[0] + 1000
        bar.update(published - bar.n)
        for reason, count in stats.rejected.items():
            REJECTED.labels(reason).inc(count)
        all_acked = publisher.wait_all_acked(published)
    finally:
        bar.close()
        publisher.close()
    elapsed = time.perf_counter() - started
    summary = {"rows_published": published, "rows_acked": publisher.acked, "loops": loop,
               "seconds": round(elapsed, 3), "rows_per_s": round(published / elapsed) if elapsed else 0,
               "rows_rejected": sum(stats.rejected.values()), "rejected_by_reason": dict(stats.rejected),
               "rejected_examples": stats.examples, "stopped_early": shutdown.requested}
    print(json.dumps(summary, indent=2), flush=True)
    shutdown.wait(settings.linger_s)
    return 0 if all_acked else 1


if __name__ == "__main__":
    sys.exit(main())
