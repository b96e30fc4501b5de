"""Verdict: more bridges need more cores (CPU per row stays flat); scale bridges by cores.

Benchmark: 1, 2 and 4 MQTT bridges on disjoint Thing shards (a script, not a test).

    .venv/bin/python benchmarks/experiments/bench_bridge_shards.py [--rows 100000] [--things 100]
        [--bridges 1,2,4]

For each count B: B bridges create their persistent sessions (``<prefix>/<k>/#``) and stop,
the simulator publishes the file under the shards (``--shards B``) into those sessions, then
the B bridges start together and are timed from the first record in Kafka until Kafka holds
every record: the bridges alone, without the simulator competing for the cores. Reports
rows/s, the bridges' CPU per row (all B processes, from /proc) and the ratio to one bridge;
and, since on a host with fewer cores than bridges the bridges only share the cores, the
projection for a host with a core per bridge: B x the rate one bridge reaches on a core of
its own (1e6 / its CPU per row), which holds while Mosquitto and Kafka keep up.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.support.events import write_events
from benchmarks.support.kafka_wait import wait_in_kafka
from stacktools.harness.cpu import process_cpu_seconds
from stacktools.harness.processes import ServiceProcess
from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.settings import Settings
from tests.support.harness import expected_records


def start_bridges(lane: Wiring, bridges: int, work: Path, label: str) -> list[ServiceProcess]:
    """The ``bridges`` bridges of ``lane``, all started at once (not waited for)."""
    return [
        service_process(
            "mqtt_bridge", lane.bridge_shard(shard, bridges), work / f"{label}-{shard}.log"
        ).start()
        for shard in range(bridges)
    ]


def measure(settings: Settings, events: Path, bridges: int, work: Path) -> dict[str, float]:
    lane = Wiring.private(settings, bridge_only=True)
    records = len(expected_records(events))
    rows = sum(1 for _ in events.open("rb"))
    # the sessions and their subscriptions
    for bridge in start_bridges(lane, bridges, work, f"session-{bridges}"):
        bridge.wait_logged('"bridge running"', 60)
        bridge.terminate()
    simulator = service_process(
        "simulator",
        lane,
        work / f"simulator-{bridges}.log",
        "--input",
        str(events),
        "--shards",
        str(bridges),
    ).start()
    if simulator.popen.wait(1800) != 0:
        raise RuntimeError(f"the simulator failed while filling the backlog: {simulator.log}")
    running = start_bridges(lane, bridges, work, f"drain-{bridges}")
    cpu_at_first: list[float] = []

    def cpu() -> float:
        return sum(process_cpu_seconds(bridge.popen.pid) for bridge in running)

    started, first_count = wait_in_kafka(
        settings,
        lane.raw,
        records,
        f"{bridges} bridges draining their backlog",
        on_first=lambda: cpu_at_first.append(cpu()),
    )
    elapsed = time.perf_counter() - started
    used = cpu() - cpu_at_first[0]
    for bridge in running:
        bridge.terminate()
    drained = records - first_count
    drained_rows = drained * rows / records
    return {
        "bridges": bridges,
        "rows_per_s": drained_rows / elapsed,
        "records_per_s": drained / elapsed,
        "cpu_us_per_row": used / drained_rows * 1e6,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument(
        "--things", type=int, default=100, help="machines in the file (spread over the shards)"
    )
    parser.add_argument("--bridges", default="1,2,4", help="bridge counts to compare")
    args = parser.parse_args()
    counts = [int(count) for count in args.bridges.split(",")]
    settings = Stack(Settings.from_sources()).up()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-bridge-shards-") as tmp:
        work = Path(tmp)
        events = work / "events.json"
        print(f"generating {args.rows:,} rows of {args.things} machines ...", flush=True)
        write_events(events, args.rows, args.things)
        for count in counts:
            print(f"{count} bridge(s): filling their sessions, then draining", flush=True)
            results.append(measure(settings, events, count, work))
    one = results[0]
    print(
        f"\nhost: {os.cpu_count()} cores; {args.rows:,} rows, {args.things} machines; bridges "
        "alone (backlog drain)"
    )
    print(
        f"{'bridges':>7} {'rows/s':>10} {'records/s':>10} {'CPU us/row':>11} "
        f"{'vs ' + str(one['bridges']):>7} {'projected rows/s, a core per bridge':>36}"
    )
    for result in results:
        projected = result["bridges"] * 1e6 / result["cpu_us_per_row"]
        print(
            f"{result['bridges']:>7} {result['rows_per_s']:>10,.0f} "
            f"{result['records_per_s']:>10,.0f} {result['cpu_us_per_row']:>11.1f} "
            f"{result['rows_per_s'] / one['rows_per_s']:>6.2f}x {projected:>36,.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
