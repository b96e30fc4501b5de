"""python -m alert_forwarder: the components' overload alerts, from Kafka to Alertmanager.

Reads the overloads topic (read_committed: only what the single pass committed) from its
beginning at every start, keeping each component's latest alert, and posts to Alertmanager's
API every firing alert again every ALERTS_RESEND (ending ALERTS_HOLD from now) and every alert
resolved since the last post, once. Alertmanager knows an alert by its labels: a restart posts
the same alerts again and nothing is notified twice. A record that is not an overload event is
counted, logged with its reason and skipped; an Alertmanager that does not answer is tried
again, the alerts kept.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition
from prometheus_client import Counter, Gauge

from alert_forwarder.alerts import FIRING, RESOLVED, Board, alert
from alert_forwarder.config import ForwarderSettings
from streamkit.deadline import Backoff
from streamkit.durations import duration_ms
from streamkit.health import beat
from streamkit.kafka_clients import client_config
from streamkit.service import entry_point, run_service
from streamkit.shutdown import ShutdownFlag
from streamkit.wire import AvroCodec
from streamkit.wire.registry import unframe

log = logging.getLogger("alert_forwarder")
EVENTS = Counter("alerts_events_read", "overload events read from Kafka", ["status"])
UNDECODABLE = Counter(
    "alerts_undecodable_records", "records of the overloads topic that are no overload event"
)
POSTS = Counter("alerts_posts", "posts to Alertmanager's API", ["outcome"])
FIRING_NOW = Gauge("alerts_firing", "components whose overload alert fires now")
POST_TIMEOUT_S = 10.0


def consumer(settings: ForwarderSettings) -> Consumer:
    """Every partition of the overloads topic from its beginning, committed records only,
    assigned rather than subscribed and never committed: the topic itself is the state, read
    whole at each start."""
    config = {
        **client_config(settings, "alert-forwarder"),
        "group.id": f"alerts.{uuid.uuid4().hex}",  # its own prefix (stacktools.stack.access)
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    reader = Consumer(config)
    topic = settings.overloads_topic
    metadata = reader.list_topics(topic, timeout=30).topics[topic]
    if metadata.error is not None:
        raise KafkaException(metadata.error)
    reader.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
    return reader


class Forwarder:
    """The board of latest events and what is still to be posted."""

    def __init__(self, settings: ForwarderSettings) -> None:
        self.settings = settings
        self.board = Board(settings.max_components)
        self.codec = AvroCodec("overload")
        self.resolved: dict[str, dict[str, Any]] = {}  # to post once
        self.url = f"{settings.alertmanager_url}/api/v2/alerts"

    def take(self, message: Message) -> None:
        """One record: the component's latest event, or counted and skipped with its reason."""
        value = message.value()
        try:
            if value is None:
                raise ValueError("a record without a value")
            body = unframe(value)[1] if self.settings.schema_registry else value
            event = self.codec.decode(body)
            if event["status"] not in (FIRING, RESOLVED):
                raise ValueError(f"status {event['status']!r}")
            alert(event, int(time.time() * 1000), 0)  # times and figures it can be posted with
        except Exception as exc:  # fastavro raises EOFError, ValueError, UnicodeDecodeError...
            UNDECODABLE.inc()
            log.warning(
                "skipped a record that is no overload event",
                extra={"reason": f"{type(exc).__name__}: {exc}", "offset": message.offset()},
            )
            return
        EVENTS.labels(event["status"]).inc()
        key = f"{event['thing']}|{event['component']}"
        self.board.put(key, event)
        if event["status"] == RESOLVED:
            self.resolved[key] = event
        else:
            self.resolved.pop(key, None)

    def post(self, now_ms: int) -> bool:
        """Every firing alert and the resolved ones not posted yet; True when Alertmanager
        took them."""
        hold_ms = duration_ms(self.settings.hold)
        firing = self.board.firing()
        alerts = [alert(e, now_ms, hold_ms) for e in [*firing, *self.resolved.values()]]
        FIRING_NOW.set(len(firing))
        if not alerts:
            return True
        request = urllib.request.Request(
            self.url,
            data=json.dumps(alerts).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=POST_TIMEOUT_S) as response:
                response.read()
        except (urllib.error.URLError, OSError) as exc:
            POSTS.labels("error").inc()
            log.warning("Alertmanager did not take the alerts", extra={"error": str(exc)})
            return False
        POSTS.labels("ok").inc()
        if self.resolved:
            log.info("alerts resolved", extra={"alerts": sorted(self.resolved)})
        self.resolved.clear()
        return True


def serve(settings: ForwarderSettings, shutdown: ShutdownFlag) -> int:
    reader = consumer(settings)
    forwarder = Forwarder(settings)
    resend_s = settings.resend.total_seconds()
    backoff = Backoff(initial_s=1.0, max_s=resend_s)
    due = 0.0
    log.info(
        "forwarding overload alerts",
        extra={"topic": settings.overloads_topic, "alertmanager": settings.alertmanager_url},
    )
    try:
        while not shutdown.requested:
            new = False
            for message in reader.consume(500, 1.0):
                if message.error() is not None:
                    log.warning("Kafka", extra={"error": str(message.error())})
                    continue
                forwarder.take(message)
                new = True
            now = time.monotonic()
            if new or now >= due:
                if forwarder.post(int(time.time() * 1000)):
                    backoff.attempts, due = 0, now + resend_s
                else:
                    due = now + backoff.next_delay()
            beat()
    finally:
        reader.close()
    return 0


@entry_point("alert_forwarder")
def main(argv: list[str] | None = None) -> int:
    return run_service("alert_forwarder", ForwarderSettings, __doc__, argv, serve)


if __name__ == "__main__":
    sys.exit(main())
