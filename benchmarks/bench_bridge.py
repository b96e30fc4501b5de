"""Benchmark: simulator -> MQTT -> bridge -> Kafka on this machine (a script, not a test).

    .venv/bin/python benchmarks/bench_bridge.py [--rows 200000] [--connections 1]
        [--baseline-rows 10000] [--no-baseline]

Starts (or reuses) the local stack, generates a file, runs the real bridge and simulator as
processes on private topics, and measures from the first row sent until Kafka holds every
record. Then the bridge alone: the same rows drained from its persistent MQTT session with no
simulator running (what the bridge does when it does not share the cores with the simulator).
Both report the bridge process's CPU per row and per record (from /proc, all its threads:
paho, librdkafka and ours), which a busy machine disturbs less than the rates.
Then runs a naive bridge in this process over the same path for comparison: auto-ack
on receipt, fastavro per record and a synchronous flush per message (the shape of the
original design, ~1,000 rows/s).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

from paho.mqtt.client import MQTTMessage

from benchmarks.support.events import write_events
from benchmarks.support.kafka_wait import wait_in_kafka
from stacktools.harness.cpu import process_cpu_seconds
from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.settings import Settings
from streamkit.events import parse_row
from streamkit.kafka_clients import idempotent_producer
from streamkit.mqtt_client import connect, make_client
from streamkit.wire import AvroCodec, record_key
from tests.support.harness import expected_records


def measure_pipeline(
    settings: Settings, events: Path, connections: int, work: Path
) -> dict[str, float]:
    lane = Wiring.private(settings, bridge_only=True)
    records = len(expected_records(events))
    rows = sum(1 for _ in events.open("rb"))
    service = service_process("mqtt_bridge", lane, work / "bridge.log").start()
    service.wait_logged('"bridge running"', 60)
    cpu_started = process_cpu_seconds(service.popen.pid)
    started = time.perf_counter()
    sim = service_process(
        "simulator",
        lane,
        work / "simulator.log",
        "--input",
        str(events),
        "--connections",
        str(connections),
    ).start()
    sim_done: float | None = None

    def note_simulator_exit() -> None:
        nonlocal sim_done
        if sim_done is None and sim.popen.poll() is not None:
            sim_done = time.perf_counter()

    wait_in_kafka(settings, lane.raw, records, "pipeline", note_simulator_exit)
    elapsed = time.perf_counter() - started
    cpu = process_cpu_seconds(service.popen.pid) - cpu_started
    service.terminate()
    return {
        "rows": rows,
        "records": records,
        "seconds": elapsed,
        "rows_per_s": rows / elapsed,
        "records_per_s": records / elapsed,
        "simulator_seconds": (sim_done or elapsed) - started,
        "cpu_us_per_row": cpu / rows * 1e6,
        "cpu_us_per_record": cpu / records * 1e6,
    }


def measure_bridge_alone(settings: Settings, events: Path, work: Path) -> dict[str, float]:
    """The bridge without the simulator competing for the cores: the rows are published while
    the bridge is stopped (its persistent session keeps them in Mosquitto), then the bridge is
    started and timed from its first record in Kafka until Kafka holds every record."""
    lane = Wiring.private(settings, bridge_only=True)
    records = len(expected_records(events))
    rows = sum(1 for _ in events.open("rb"))
    first = service_process(
        "mqtt_bridge", lane, work / "bridge-session.log"
    ).start()  # creates the session and its subscription
    first.wait_logged('"bridge running"', 60)
    first.terminate()
    sim = service_process(
        "simulator", lane, work / "backlog-simulator.log", "--input", str(events)
    ).start()
    if sim.popen.wait(1800) != 0:
        raise RuntimeError("simulator failed while filling the backlog")
    service = service_process("mqtt_bridge", lane, work / "bridge-alone.log").start()
    cpu_at_first: list[float] = []
    # Timed from the first record in Kafka, so the bridge's start-up (imports, connections)
    # does not count; the records of that first poll are left out of the rate and the CPU.
    started, first_count = wait_in_kafka(
        settings,
        lane.raw,
        records,
        "bridge draining its backlog",
        on_first=lambda: cpu_at_first.append(process_cpu_seconds(service.popen.pid)),
    )
    elapsed = time.perf_counter() - started
    cpu = process_cpu_seconds(service.popen.pid) - cpu_at_first[0]
    service.terminate()
    drained = records - first_count
    return {
        "rows": rows,
        "seconds": elapsed,
        "records_per_s": drained / elapsed,
        "rows_per_s": drained / elapsed * rows / records,
        "cpu_us_per_record": cpu / drained * 1e6,
        "cpu_us_per_row": cpu / drained * records / rows * 1e6,
    }


def measure_naive_baseline(settings: Settings, events: Path) -> dict[str, float]:
    """The straightforward bridge: everything per message, synchronously."""
    lane = Wiring.private(settings, bridge_only=True)
    codec = AvroCodec("measurement")
    producer = idempotent_producer(settings, "naive-bridge", **{"linger.ms": 0})
    received = threading.Event()
    done = {"rows": 0}
    total = sum(1 for _ in events.open("rb"))

    def on_message(_c: object, _u: object, message: MQTTMessage) -> None:
        row = parse_row(bytes(message.payload))
        for quantity, value in row.quantities.items():
            record = {
                "thing": row.thing,
                "quantity": quantity,
                "event_time_ms": row.timestamp_ms,
                "value": value,
                "row_id": row.row_id,
            }
            producer.produce(
                lane.raw, codec.encode(record), record_key(row.thing, quantity, row.timestamp_ms)
            )
        producer.flush()
        done["rows"] += 1
        if done["rows"] == total:
            received.set()

    client = make_client(settings, f"naive-{lane.prefix}", mqtt5=False)
    client.on_message = on_message
    connect(client, settings)
    client.subscribe(f"{lane.prefix}/#", qos=1)
    time.sleep(1)
    started = time.perf_counter()
    sim = service_process(
        "simulator", lane, events.parent / "baseline-simulator.log", "--input", str(events)
    ).start()
    received.wait(1800)
    elapsed = time.perf_counter() - started
    sim.popen.wait(60)
    client.disconnect()
    client.loop_stop()
    return {"rows": total, "seconds": elapsed, "rows_per_s": total / elapsed}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--baseline-rows", type=int, default=10_000)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the naive bridge (comparing two versions)"
    )
    args = parser.parse_args()
    settings = Stack(Settings.from_sources()).up()
    with tempfile.TemporaryDirectory(prefix="bench-bridge-") as tmp:
        work = Path(tmp)
        events, baseline_events = work / "events.json", work / "baseline.json"
        print(f"generating {args.rows} rows ...", flush=True)
        write_events(events, args.rows)
        write_events(baseline_events, args.baseline_rows)
        print("pipeline: simulator -> mosquitto -> mqtt_bridge -> kafka", flush=True)
        result = measure_pipeline(settings, events, args.connections, work)
        print(
            "bridge alone: draining the same rows from its MQTT session (no simulator running)",
            flush=True,
        )
        alone = measure_bridge_alone(settings, events, work)
        baseline = None
        if not args.no_baseline:
            print("baseline: naive bridge (auto-ack, fastavro, flush per message)", flush=True)
            baseline = measure_naive_baseline(settings, baseline_events)
    print()
    print(f"rows                       {result['rows']:>12,}")
    print(f"Kafka records              {result['records']:>12,}")
    print(
        f"end to end seconds         {result['seconds']:>12.2f}  (simulator alone: "
        f"{result['simulator_seconds']:.2f})"
    )
    print(f"rows/s                     {result['rows_per_s']:>12,.0f}")
    print(f"records/s                  {result['records_per_s']:>12,.0f}")
    print(
        f"bridge CPU us/row          {result['cpu_us_per_row']:>12.1f}  "
        f"({result['cpu_us_per_record']:.1f} per record)"
    )
    print(
        f"bridge alone rows/s        {alone['rows_per_s']:>12,.0f}  ({alone['records_per_s']:,.0f} "
        "records/s, after start-up)"
    )
    print(
        f"bridge alone CPU us/row    {alone['cpu_us_per_row']:>12.1f}  "
        f"({alone['cpu_us_per_record']:.1f} per record)"
    )
    if baseline is not None:
        print(
            f"naive baseline rows/s      {baseline['rows_per_s']:>12,.0f}  ({baseline['rows']:,} "
            "rows)"
        )
        print(f"ratio to naive baseline    {result['rows_per_s'] / baseline['rows_per_s']:>12.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
