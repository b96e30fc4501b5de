"""Verdict: the bridge's own Python is a minor share of a row; paho and servers bound it.

Benchmark: the bridge's per-message path in this process, without servers (a script, not a test).

    PYTHONPATH=. .venv/bin/python benchmarks/experiments/bench_bridge_path.py [--rows 50000]
        [--repeats 5] [--profile 25]

The real ``Bridge`` (its MQTT callback, row parser, record splitter, in-order acks and metrics)
with stand-ins for paho and librdkafka: the producer takes each batch and, on the next poll,
reports every record delivered through the message's ``on_delivery`` as librdkafka does, one
call per record. So the numbers are the bridge's own Python per message, not the clients' or
the servers'. Prints CPU microseconds per message and per record (best of the repeats), then,
with --profile N, cProfile's top N functions by own time.

Run with PYTHONPATH pointing at the tree to measure (the venv's editable install points at the
main checkout); comparing two trees means running this script once with each.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

from paho.mqtt.client import MQTTMessage

import mqtt_bridge.bridge as bridge_module
from mqtt_bridge.config import BridgeSettings
from streamkit.paths import REPO_ROOT
from streamkit.shutdown import ShutdownFlag


class _Producer:
    """librdkafka's shape: produce_batch queues, poll serves one delivery report per record."""

    def __init__(self) -> None:
        self.pending: list[tuple[Any, int]] = []
        self.records = 0

    def produce_batch(self, _topic: str, batch: list, partition: int, on_delivery: Any) -> int:
        self.pending.append((on_delivery, len(batch)))
        self.records += len(batch)
        return len(batch)

    def produce(
        self, _topic: str, value: bytes, key: bytes, on_delivery: Any, **_kwargs: Any
    ) -> None:
        self.pending.append((on_delivery, 1))

    def poll(self, _timeout: float) -> int:
        pending, self.pending = self.pending, []
        for on_delivery, records in pending:
            for _ in range(records):
                on_delivery(None, None)
        return len(pending)

    def __len__(self) -> int:
        return len(self.pending)


class _Client:
    """paho's: the calls the bridge makes, PUBACKs counted."""

    def __init__(self) -> None:
        self.acked = 0

    def manual_ack_set(self, _on: bool) -> None: ...

    def max_inflight_messages_set(self, _n: int) -> None: ...

    def ack(self, _mid: int, _qos: int) -> None:
        self.acked += 1


def make_bridge() -> tuple[Any, _Producer, _Client]:
    client, producer = _Client(), _Producer()
    # stand-ins for the servers, for the rest of this process
    patch.object(bridge_module, "make_client", lambda *_a, **_k: client).start()
    patch.object(bridge_module, "idempotent_producer", lambda *_a, **_k: producer).start()
    patch.object(bridge_module, "partition_count", lambda *_a, **_k: 4).start()
    settings = BridgeSettings.from_sources(cli={"raw_topic": "raw", "dlq_topic": "dlq"})
    return bridge_module.Bridge(settings, ShutdownFlag()), producer, client


def load_messages(rows: int) -> list[MQTTMessage]:
    with tempfile.TemporaryDirectory(prefix="bench-bridge-path-") as tmp:
        events = Path(tmp) / "events.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "simulator.generate",
                "-o",
                str(events),
                "--rows",
                str(rows),
                "--things",
                "8",
                "--no-progress",
            ],
            cwd=REPO_ROOT,
            check=True,
        )
        lines = [line for line in events.read_bytes().splitlines() if line.strip()]
    messages = []
    for mid, line in enumerate(lines, 1):
        message = MQTTMessage(mid=mid % 65535 + 1, topic=b"machines/M")
        message.payload, message.qos = line, 1
        messages.append(message)
    return messages


def run(
    bridge: Any, producer: _Producer, messages: list[MQTTMessage], poll_every: int = 100
) -> None:
    """Every message through the MQTT callback, delivery reports served every ``poll_every``
    messages (the real bridge polls after each produce and from its main loop)."""
    on_message = bridge._on_message
    for index, message in enumerate(messages, 1):
        on_message(None, None, message)
        if index % poll_every == 0:
            producer.poll(0)
    producer.poll(0)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print cProfile's top N by own time"
    )
    args = parser.parse_args()
    messages = load_messages(args.rows)
    print(f"code under test: {Path(bridge_module.__file__).resolve().parent.parent}")
    timings = []
    for _ in range(args.repeats):
        bridge, producer, client = make_bridge()
        started = time.process_time()
        run(bridge, producer, messages)
        timings.append(time.process_time() - started)
        if client.acked != len(messages) or bridge.failure is not None or len(bridge.acks):
            raise RuntimeError(
                f"not every message was acked: {client.acked}/{len(messages)}, {bridge.failure!r}"
            )
    best, records = min(timings), producer.records
    print(
        f"messages {len(messages):,}  records {records:,}  ({records / len(messages):.2f} per "
        "message)"
    )
    print(
        f"CPU us/message  {best / len(messages) * 1e6:8.2f}  (best of {args.repeats}; "
        f"median {sorted(timings)[len(timings) // 2] / len(messages) * 1e6:.2f})"
    )
    print(f"CPU us/record   {best / records * 1e6:8.2f}")
    print(f"messages/s      {len(messages) / best:>8,.0f}  (one core, the bridge's Python only)")
    if args.profile:
        bridge, producer, _client = make_bridge()
        profiler = cProfile.Profile()
        profiler.runcall(run, bridge, producer, messages)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
