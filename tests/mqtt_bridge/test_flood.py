"""Load past capacity: valid and invalid MQTT messages published as fast as the broker takes
them for FLOOD_SECONDS (30), the bridge stopped gracefully (SIGTERM) for the middle third, so
that when it is back the whole backlog is offered to it at once.

The flood exceeds the bridge by construction, not by racing the CPU: while the publishers run,
Kafka itself throttles the bridge's producer to QUOTA_BYTES_PER_S with a client quota on the
pair (bridge user, this test's bridge client id): the honest stand-in for a slow or rate-limited
cluster, applied by the real broker to the real bridge, and to nothing else on the shared
broker. At that rate the bridge forwards a few hundred messages a second, far below what any
machine reads from MQTT, so it must fill its window of BRIDGE_MAX_UNACKED messages and stop
reading (a bridge setting that slowed it instead would test a code path production never runs).
The quota is lifted once the publishers are done, and the backlog drains at full speed.

The bridge's memory must stay bounded (Mosquitto keeps the backlog in its persistent session,
itself bounded by MQTT_MAX_QUEUED_MESSAGES: its peak RSS must stay under what that bound allows,
and the flood offers at most 90% of it, so that nothing is dropped by design),
backpressure must show in its metrics (the unacked gauge at the limit), afterwards every valid
row is in Kafka exactly and every invalid one in the dead-letter topic, and the graceful restart
re-sends nothing (it flushes Kafka, acks all it confirmed and lets Mosquitto read those acks
before the connection ends: streamkit.mqtt_client.BufferedClient._sock_close; before that, a
graceful restart under an unthrottled flood re-sent about 26,000 messages).
Peak memory of the bridge and of Mosquitto is printed."""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from mqtt_bridge.config import BridgeSettings
from stacktools.harness.scrape import metric_sum, scrape_metrics
from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.settings import Settings
from streamkit.deadline import Deadline
from streamkit.kafka_io import read_to_end, wait_for_count
from streamkit.wire import parse_record_key, record_key
from tests.support.harness import group_by_key, start_bridge, wait_for_keys
from tests.support.kafka_quota import ProduceQuota
from tests.support.messages import header_of
from tests.support.mqtt import RawPublisher

pytestmark = [pytest.mark.stack, pytest.mark.chaos]
SECONDS = float(os.environ.get("FLOOD_SECONDS", "30"))
MAX_UNACKED = 500
BRIDGE_RSS_LIMIT_MB = 400
T0 = 1_554_000_000_000
#: The bridge's Kafka outlet while the publishers run: about 60 bytes of batched, compressed
#: records per message, so a few hundred messages a second.
QUOTA_BYTES_PER_S = 16 * 1024
SAMPLE_S = 0.5
#: Mosquitto's memory per message kept for the bridge, with this test's ~60-byte payloads: about
#: 530 bytes measured (427 MB at a backlog of 800,000), with a margin; and its own before that.
MOSQUITTO_BYTES_PER_MESSAGE = 700
MOSQUITTO_BASE_MB = 64
#: The share of Mosquitto's queue bound the publishers may fill: past the bound it would drop.
QUEUE_SHARE = 0.9


def mosquitto_rss_limit_mb(settings: Settings) -> float:
    """What Mosquitto may hold for the bridge by its bounds: queued plus in flight messages."""
    held = settings.mqtt_max_queued_messages + settings.mqtt_max_inflight_messages
    return MOSQUITTO_BASE_MB + held * MOSQUITTO_BYTES_PER_MESSAGE / 2**20


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"VmRSS:\s+(\d+) kB", status)
    assert match, f"no VmRSS for {pid}"
    return int(match.group(1)) / 1024


class Sampler(threading.Thread):
    """Peak RSS of the bridge and Mosquitto, and the bridge's unacked gauge, every SAMPLE_S."""

    def __init__(self, bridge_pid: int, mosquitto_pid: int | None, metrics_port: int) -> None:
        super().__init__(daemon=True)
        self.pids, self.port = {"bridge": bridge_pid, "mosquitto": mosquitto_pid}, metrics_port
        self.peak_mb = {name: 0.0 for name in self.pids}
        self.peak_unacked = 0.0
        self.stop = threading.Event()

    def watch_bridge(self, pid: int, metrics_port: int) -> None:
        self.pids["bridge"], self.port = pid, metrics_port

    def run(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            try:
                for name, pid in self.pids.items():
                    if pid is not None:
                        self.peak_mb[name] = max(self.peak_mb[name], rss_mb(pid))
                self.peak_unacked = max(
                    self.peak_unacked,
                    metric_sum(scrape_metrics(self.port), "bridge_unacked_messages"),
                )
            except OSError:  # the bridge between its stop and its restart
                continue


PUBLISHERS = 3


def flood(
    settings: Settings,
    prefix: str,
    index: int,
    seconds: float,
    cap: int,
    counts: multiprocessing.Queue,
) -> None:
    """One publisher process: valid rows of its own five Things and every fourth message
    invalid, as fast as Mosquitto takes them, for ``seconds`` or ``cap`` messages."""
    publisher = RawPublisher(
        settings.acting_as("mqtt", "machine"),
        max_inflight=2000,
        client_prefix=f"flood-{index}-{prefix}",
    )
    published = 0
    deadline = Deadline(seconds)
    while not deadline.expired() and published < cap:
        publisher.publish_raw(f"{prefix}/F{index}", flood_payload(index, published))
        published += 1
    publisher.wait_all_acked(published, 120)
    publisher.close()
    counts.put((index, published))


def flood_payload(index: int, n: int) -> bytes:
    thing = f"F{index}-{n % 5}".encode()
    if n % 4 == 3:
        return b'{"Thing": "%s", "Timestamp": "not a time", "a": %d}' % (thing, n)
    return b'{"Thing": "%s", "Timestamp": %d, "a": %d, "b": 0.5}' % (thing, T0 + n, n)


def expected_keys(index: int, published: int) -> set[bytes]:
    return {
        record_key(f"F{index}-{n % 5}", q, T0 + n)
        for n in range(published)
        if n % 4 != 3
        for q in "ab"
    }


@pytest.fixture
def lane(stack_settings: Settings) -> Wiring:
    return Wiring.private(stack_settings, bridge_only=True)


def session_story(settings: Settings, lane: Wiring, bridge_logs: list[Path]) -> str:
    """What a failure needs to be told apart: a re-send comes from an MQTT session that ended
    (the bridge's connection lost and resumed, a publisher's, or Mosquitto restarted); the
    bridges' warnings and Mosquitto's lines about this test's clients say which."""
    lines = [
        line[:300]
        for log in bridge_logs
        if log.exists()
        for line in log.read_text(errors="replace").splitlines()
        if ('"WARNING"' in line or '"ERROR"' in line or "MQTT connected" in line)
        and "dead-lettered" not in line
    ]
    mosquitto_log = settings.run_dir / "logs" / "mosquitto.log"
    broker = [
        line[:300]
        for line in mosquitto_log.read_text(errors="replace").splitlines()
        if lane.bridge_client_id in line or "flood-" in line or "starting" in line
    ]
    return (
        f"bridge log lines ({len(lines)}): {lines[:40]}; "
        f"Mosquitto's lines ({len(broker)}): {broker[-40:]}"
    )


def resent_messages(raw: list, dead: list) -> int:
    """Messages the bridge sent to Kafka more than once: a valid row is its thing and time (all
    its records are sent again with it), a dead letter its payload (unique here)."""
    rows: set[tuple[str, int]] = set()
    for key, n in Counter(m.key() for m in raw).items():
        if n > 1:
            parsed = parse_record_key(key)
            rows.add((parsed.thing, parsed.event_time_ms))
    return len(rows) + sum(n - 1 for n in Counter(m.value() for m in dead).values())


def test_a_flood_past_capacity_keeps_memory_bounded_and_loses_nothing(
    stack_settings: Settings, lane: Wiring, tmp_path: Path
) -> None:
    settings = stack_settings
    bridge_user = BridgeSettings.from_sources().kafka_username
    context = multiprocessing.get_context("spawn")
    counts = context.Queue()
    with ProduceQuota(settings, bridge_user, lane.bridge_client_id, QUOTA_BYTES_PER_S) as quota:
        service = start_bridge(lane, tmp_path / "bridge.log", "--max-unacked", str(MAX_UNACKED))
        metrics_port = int(service.args[service.args.index("--metrics-port") + 1])
        (mosquitto,) = Stack(settings, ["mosquitto"]).status()
        sampler = Sampler(service.popen.pid, mosquitto.pid, metrics_port)
        sampler.start()
        started = time.monotonic()
        try:
            cap = int(settings.mqtt_max_queued_messages * QUEUE_SHARE) // PUBLISHERS
            workers = [
                context.Process(target=flood, args=(settings, lane.prefix, i, SECONDS, cap, counts))
                for i in range(PUBLISHERS)
            ]
            for worker in workers:
                worker.start()
            # The scenario's timing, not a wait for a condition: the middle third of the flood
            # with the bridge stopped (gracefully), so that Mosquitto keeps it in the bridge's
            # session and the restarted bridge faces the whole backlog at once.
            time.sleep(SECONDS / 3)
            assert service.terminate() == 0
            time.sleep(SECONDS / 3)
            # Resuming its session, it misses nothing whenever its SUBACK comes: Mosquitto sends the
            # kept messages first, and the bridge takes them at the throttled pace.
            service = service_process(
                "mqtt_bridge",
                lane,
                tmp_path / "bridge-restarted.log",
                "--max-unacked",
                str(MAX_UNACKED),
            ).start()
            service.wait_logged('"metrics endpoint up"', 60)
            metrics_port = int(service.args[service.args.index("--metrics-port") + 1])
            sampler.watch_bridge(service.popen.pid, metrics_port)
            published = dict(counts.get(timeout=SECONDS + 180) for _ in workers)
            for worker in workers:
                worker.join(30)
            publish_s = time.monotonic() - started
            throttled_peak = sampler.peak_unacked
            quota.lift()  # the backlog drains at full speed
            valid = set().union(*(expected_keys(i, n) for i, n in published.items()))
            invalid = sum(n // 4 for n in published.values())  # n % 4 == 3 for n < published
            # re-sends inflate counts
            missing = valid - wait_for_keys(settings, lane.raw, valid, 600)
            assert not missing, f"{len(missing)} valid records lost, e.g. {sorted(missing)[:3]}"
            drained_s = time.monotonic() - started
            assert wait_for_count(settings, lane.dlq, invalid, 120) >= invalid
            assert service.alive(), "the bridge died under load"
            assert '"bridge running"' in service.logged_since_start(), (
                "the restarted bridge never got its SUBACK"
            )
        finally:
            sampler.stop.set()
            service.terminate()
    raw = read_to_end(settings, lane.raw)
    assert {m.key() for m in raw} == valid
    assert all(len(set(values)) == 1 for values in group_by_key(raw).values()), (
        "a re-send that is not identical"
    )
    dead = read_to_end(settings, lane.dlq)
    letters = Counter(m.value() for m in dead)
    assert {header_of(m, "reason") for m in dead} == {b"bad_timestamp"}
    assert len(letters) == invalid, (len(letters), invalid)  # each invalid payload is unique
    total = sum(published.values())
    resent = resent_messages(raw, dead)
    print(
        f"re-sent messages after the graceful restart: {resent} (raw records "
        f"{len(raw) - len(valid)}, dead letters {len(dead) - invalid})"
    )
    print(
        f"flood: {total:,} messages from {PUBLISHERS} publishers in {publish_s:.1f} s "
        f"({total / publish_s:,.0f}/s offered, the bridge's Kafka outlet throttled to "
        f"{QUOTA_BYTES_PER_S:,} B/s), bridge done after {drained_s:.1f} s; {len(raw):,} raw "
        f"records, {invalid:,} dead letters; peak RSS bridge {sampler.peak_mb['bridge']:.0f} MB, "
        f"mosquitto {sampler.peak_mb['mosquitto']:.0f} MB (its bound: "
        f"{settings.mqtt_max_queued_messages:,} queued + {settings.mqtt_max_inflight_messages:,} "
        f"in flight, {mosquitto_rss_limit_mb(settings):.0f} MB; "
        f"{sampler.peak_mb['mosquitto'] * 2**20 / total:.0f} bytes per message offered); peak "
        f"unacked {throttled_peak:.0f} while throttled (limit {MAX_UNACKED})"
        + (
            " [the publishers stopped at the queue's share]"
            if max(published.values()) >= cap
            else ""
        )
    )
    # The throttle makes the flood exceed the bridge: it must have filled its window.
    assert throttled_peak >= MAX_UNACKED, "no backpressure although Kafka throttled the bridge"
    assert sampler.peak_mb["bridge"] < BRIDGE_RSS_LIMIT_MB
    # Mosquitto's memory is bounded by its queue bound, which the backlog stayed under
    assert total <= settings.mqtt_max_queued_messages, (total, "offered past the queue bound")
    assert sampler.peak_mb["mosquitto"] < mosquitto_rss_limit_mb(settings)
    # A graceful stop re-sends nothing: messages read after the SIGTERM are neither produced nor
    # acked (Mosquitto delivers them again, once); the (at most MAX_UNACKED) messages between Kafka
    # and their PUBACK are flushed and acked; the close lets Mosquitto read those PUBACKs. With a
    # plain close it re-sent 499 here (the last flush's acks), tens of thousands unthrottled.
    assert resent == 0, f"{resent} messages re-sent by a graceful restart; " + session_story(
        settings, lane, [tmp_path / "bridge.log", tmp_path / "bridge-restarted.log"]
    )
