"""python -m mqtt_bridge: MQTT (QoS 1, persistent session) -> Kafka (idempotent, acks=all).

Loss-free by ordering: a message is acknowledged to the MQTT broker only after Kafka confirmed
every record made from it (or its dead-letter record). A crash before that leaves the message
unacknowledged in our persistent session, so the broker delivers it again when we are back; the
re-sent records have the same keys and bytes, which compaction and downstream readers recognise.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable

import paho.mqtt.client as mqtt
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from prometheus_client import REGISTRY, Counter, Gauge, Histogram

from mqtt_bridge.acks import InOrderAcks
from mqtt_bridge.config import BridgeSettings
from mqtt_bridge.counts import Counts
from mqtt_bridge.records import DLQ_SAMPLE_BYTES, RowSplitter
from streamkit.cli import entry_point
from streamkit.deadline import Backoff, Deadline, TimedOut, wait_until
from streamkit.durations import duration_ms
from streamkit.errors import TopicMissing
from streamkit.events import RowError, check_event_time, check_topic_thing, parse_row
from streamkit.health import beat
from streamkit.kafka_clients import idempotent_producer, partition_count, produce_retrying
from streamkit.mqtt_client import connect, make_client
from streamkit.service import run_service
from streamkit.shutdown import ShutdownFlag
from streamkit.wire import dead_letters
from streamkit.wire.registry import header as registry_header

log = logging.getLogger("mqtt_bridge")

DLQ = Counter("bridge_dlq_total", "messages dead-lettered, by reason", ["reason"])
PRODUCE_LATENCY = Histogram(
    "bridge_produce_latency_seconds",
    "MQTT message in -> all its Kafka records confirmed",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
PRODUCER_QUEUE = Gauge("bridge_producer_queue_length", "records waiting in the Kafka producer")
UNACKED = Gauge("bridge_unacked_messages", "MQTT messages waiting for Kafka before their PUBACK")
DELIVERY_FAILURES = Counter(
    "bridge_delivery_failures_total", "Kafka records that could not be delivered"
)
#: What the MQTT-session alerts read: a connection down, or a reconnect whose broker had
#: forgotten our persistent session (messages published meanwhile were not kept for us).
CONNECTED = Gauge("bridge_mqtt_connected", "1 while connected to the MQTT broker, else 0")
SESSIONS_LOST = Counter(
    "bridge_mqtt_sessions_lost_total",
    "reconnects on which the broker no longer had our persistent session",
)
#: Without a SUBACK and without taking any message for this long, the subscription is taken as
#: refused.
SUBACK_STALL_S = 30.0
#: bridge_messages_total{outcome}, bridge_records_total: plain integers on the hot path
COUNTS = Counts()
REGISTRY.register(COUNTS)


class Bridge:
    def __init__(self, settings: BridgeSettings, shutdown: ShutdownFlag) -> None:
        self.settings = settings
        self.shutdown = shutdown
        self.max_future_ms = duration_ms(settings.max_future)
        self.producer: Producer = idempotent_producer(
            settings, settings.mqtt_client_id, **{"linger.ms": duration_ms(settings.linger)}
        )
        self.splitter = RowSplitter(
            self._partitions(settings.raw_topic),
            header=registry_header(settings, settings.raw_topic, "measurement"),
        )
        self.client = make_client(
            settings,
            settings.mqtt_client_id,
            persistent_session=True,
            session_expiry=settings.session_expiry,
            mqtt5=settings.mqtt5,
        )
        self.client.manual_ack_set(True)
        self.client.max_inflight_messages_set(1000)
        self.acks = InOrderAcks(self.client.ack, PRODUCE_LATENCY.observe, self._delivery_failed)
        self.failure: Exception | None = None  # set by the MQTT thread: the run ends with exit 1
        self.produce_failed = False  # a message could not be queued: take no more, exit
        self.closing = (
            False  # set by _close: the MQTT thread leaves a backpressure wait and takes no more
        )
        self.connected_before = False  # a later connect without our session lost messages
        self.client.on_message = self._on_message
        self.client.on_disconnect = self._on_disconnect
        self.client.on_connect = self._on_connect
        PRODUCER_QUEUE.set_function(lambda: len(self.producer))
        UNACKED.set_function(lambda: len(self.acks))

    def _partitions(self, topic: str) -> int:
        try:
            return partition_count(self.settings, topic)
        except TopicMissing:
            raise TopicMissing(
                f"Kafka topic {topic} does not exist: run mds-topics "
                "(python -m stacktools.stack.topics)"
            ) from None

    # ------------------------------------------------------------------------- MQTT side
    def _on_connect(
        self,
        client: mqtt.Client,
        _u: object,
        flags: mqtt.ConnectFlags,
        reason: mqtt.ReasonCode,
        _p: object = None,
    ) -> None:
        if reason.is_failure:
            log.error("MQTT connect refused", extra={"reason": str(reason)})
            return
        if self.connected_before and not flags.session_present:
            SESSIONS_LOST.inc()
            log.warning("MQTT session lost: the broker kept no messages for us while away")
        self.connected_before = True
        CONNECTED.set(1)
        # Subscribing again is harmless with a resumed session and needed with a new one.
        client.subscribe(f"{self.settings.mqtt_topic_prefix}/#", qos=1)
        log.info("MQTT connected", extra={"session_present": flags.session_present})

    def _on_disconnect(
        self, _c: mqtt.Client, _u: object, _f: object, reason: mqtt.ReasonCode, _p: object
    ) -> None:
        CONNECTED.set(0)
        dropped = self.acks.reset()
        if not self.shutdown.requested:
            log.warning(
                "MQTT connection lost; unacked messages will be redelivered",
                extra={"reason": str(reason), "unacked": dropped},
            )

    def _on_message(self, _c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        """paho's callback: nothing may escape it, or paho's network thread dies and the process
        lives on ingesting nothing. A failure of one message is a dead letter (in ``_take``);
        anything else ends the run (exit 1) so a supervisor restarts the bridge."""
        try:
            self._take(message)
        except Exception as exc:
            log.exception("the MQTT callback failed; exiting", extra={"topic": message.topic})
            self.failure = exc

    def _take(self, message: mqtt.MQTTMessage) -> None:
        while len(self.acks) >= self.settings.max_unacked and not self._taking_no_more():
            # backpressure: wait for Kafka instead of buffering without bound, staying
            # connected however long Kafka takes (this is paho's network thread)
            self.producer.poll(0.05)
            if not self.client.keep_alive_in_callback():
                # the connection is gone: its PUBACK could not leave, the broker sends the
                # message again on the next one; return so that paho sees the loss
                COUNTS.deferred += 1
                return
        if self._taking_no_more():
            # Not acked: the broker keeps it for our next session. After a failed produce no
            # later message may reach Kafka before the failed one (it would overtake it in its
            # partition): they all wait for the restart, which gets them again in order.
            # Checked after the backpressure wait too: a message produced once the shutdown's
            # flush has begun could miss its PUBACK and be sent again by the next run.
            COUNTS.deferred += 1
            return
        payload = message.payload
        if len(payload) > self.settings.max_payload_bytes:
            self._dead_letter(
                message,
                "payload_too_large",
                f"{len(payload)} bytes > limit {self.settings.max_payload_bytes}",
                payload[:DLQ_SAMPLE_BYTES],
            )
            return
        try:
            row = parse_row(payload)
            if self.settings.mqtt_machine_identities:
                check_topic_thing(message.topic, row.thing)
            check_event_time(row.timestamp_ms, int(time.time() * 1000), self.max_future_ms)
            partition, batch = self.splitter.batch(row)
        except RowError as exc:
            self._dead_letter(message, exc.reason, str(exc), payload)
            return
        except Exception as exc:  # an input class no check foresaw: a dead letter all the same
            log.exception("unexpected failure on one message; dead-lettered")
            self._dead_letter(message, "unprocessable", f"{type(exc).__name__}: {exc}", payload)
            return
        records = len(batch)
        # The entry is the delivery callback of every record of the message (_delivery_failed
        # on a failure). One call for the whole row: its records share the thing's partition.
        entry = self.acks.add(message.mid, message.qos, records)
        if not self._produce_batch(batch, partition, entry):
            self.produce_failed = True
            # never queued: the message stays unacknowledged, the bridge exits
            for _ in range(records):
                self.acks.confirm(entry, False)
            return
        COUNTS.records += records
        COUNTS.ok += 1
        self.producer.poll(0)

    def _taking_no_more(self) -> bool:
        """A shutdown, a failed produce or a closing run: messages from now on stay unacked."""
        return self.shutdown.requested or self.produce_failed or self.closing

    def _delivery_failed(self, err: object) -> None:
        """Kafka reported a record of the raw topic undelivered: its message stays unacked and no
        later message may overtake it (see ``_take``); the main loop ends the run."""
        self.produce_failed = True
        DELIVERY_FAILURES.inc()
        log.error("Kafka delivery failed", extra={"error": str(err)})

    def _produce_batch(
        self,
        batch: list[dict],
        partition: int,
        delivered: Callable[[KafkaError | None, Message | None], None],
    ) -> bool:
        """Queue every record: waits while the local queue is full and retries transient errors;
        False on an error that will not pass (the caller fails the message, the bridge exits
        and the broker redelivers it to the next run)."""
        backoff: Backoff | None = None  # made on the first retry only: this runs once per message
        while True:
            try:
                queued = self.producer.produce_batch(
                    self.settings.raw_topic, batch, partition=partition, on_delivery=delivered
                )
            except BufferError:
                queued = 0
                for m in batch:
                    m["_error"] = True
            except KafkaException as exc:
                if not exc.args[0].retriable() or self.shutdown.requested:
                    DELIVERY_FAILURES.inc(len(batch))
                    log.error("Kafka produce failed", extra={"error": str(exc.args[0])})
                    return False
                log.warning("Kafka produce failed, retrying", extra={"error": str(exc.args[0])})
                backoff = backoff or Backoff(initial_s=0.1, max_s=2.0)
                self.producer.poll(backoff.next_delay())
                continue
            if queued == len(batch):
                return True
            # Local queue full: librdkafka marks the rejected ones; retry those after draining.
            batch = [m for m in batch if "_error" in m]
            for m in batch:
                del m["_error"]
            self.producer.poll(0.1)

    def _dead_letter(
        self, message: mqtt.MQTTMessage, reason: str, detail: str, value: bytes | bytearray
    ) -> None:
        entry = self.acks.add(message.mid, message.qos, 1)
        self._produce(
            self.settings.dlq_topic,
            bytes(value),  # paho's payload is bytes in practice (then this is no copy)
            message.topic.encode("utf-8", "replace"),
            lambda err, _m: self.acks.confirm(entry, err is None),
            dead_letters.mqtt_headers(reason, detail, message.topic, len(message.payload)),
        )
        DLQ.labels(reason).inc()
        COUNTS.dlq += 1
        log.warning(
            "dead-lettered a message",
            extra={"reason": reason, "detail": detail[:200], "topic": message.topic},
        )

    def _produce(
        self,
        topic: str,
        value: bytes,
        key: bytes,
        callback: Callable[[KafkaError | None, Message | None], None],
        headers: list[tuple[str, bytes]],
    ) -> None:
        backoff = Backoff(initial_s=0.1, max_s=2.0)
        while True:
            try:
                produce_retrying(
                    self.producer,
                    topic,
                    value,
                    key,
                    poll_s=0.1,
                    on_delivery=callback,
                    headers=headers,
                )
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or self.shutdown.requested:
                    DELIVERY_FAILURES.inc()
                    log.error("Kafka produce failed", extra={"error": str(exc.args[0])})
                    # the message stays unacknowledged; the bridge exits
                    callback(exc.args[0], None)
                    return
                self.producer.poll(backoff.next_delay())

    # ------------------------------------------------------------------------- lifecycle
    def run(self) -> int:
        subscribed = threading.Event()
        refused: list[str] = []

        def on_subscribe(
            _c: object, _u: object, _mid: int, codes: list[mqtt.ReasonCode], _p: object = None
        ) -> None:
            refused.extend(str(code) for code in codes if code.is_failure)
            subscribed.set()

        self.client.on_subscribe = on_subscribe
        connect(self.client, self.settings)
        # connect() waits for this CONNACK with callbacks of its own: _on_connect sees only the
        # reconnects, so the first connection is recorded here
        self.connected_before = True
        CONNECTED.set(1)
        # later reconnects subscribe in _on_connect
        self.client.subscribe(f"{self.settings.mqtt_topic_prefix}/#", qos=1)
        if not self._wait_for_suback(subscribed, SUBACK_STALL_S) or refused:
            # a refused subscription (the broker's ACL) would leave a live bridge that reads nothing
            log.error(
                "the MQTT broker did not grant the subscription",
                extra={
                    "subscription": f"{self.settings.mqtt_topic_prefix}/#",
                    "refused": refused or f"no SUBACK, and no message taken, in {SUBACK_STALL_S} s",
                },
            )
            self._close(flush=False)
            return 1
        # Only now does the broker keep messages for us: a first-ever session misses what was
        # published before this line (every later start resumes the session and misses nothing).
        log.info(
            "bridge running",
            extra={
                "subscription": f"{self.settings.mqtt_topic_prefix}/#",
                "raw_topic": self.settings.raw_topic,
                "partitions": self.splitter.partitions,
            },
        )
        while not self.shutdown.requested:
            self.producer.poll(0.1)
            if self._network_thread_alive():
                beat()
            if self.failure is not None:
                self._close(flush=False)
                return 1
            if self.acks.blocked_by_failure:
                log.error(
                    "a Kafka delivery failed for good; "
                    "exiting so the broker redelivers unacked messages"
                )
                self._close(flush=False)
                return 1
        log.info("shutting down: flushing Kafka, acknowledging what Kafka confirmed")
        self._close(flush=True)
        return 0

    def _wait_for_suback(self, subscribed: threading.Event, stall_s: float) -> bool:
        """Until the SUBACK, a shutdown or a failure (True: the main loop takes over), or
        ``stall_s`` without a SUBACK and without progress (False). A resumed session's broker
        sends the messages it kept for us before the SUBACK, and we take them at Kafka's pace:
        behind a backlog and a slow cluster the SUBACK may take minutes while the bridge works."""
        taken = -1
        deadline = Deadline(stall_s)
        while not subscribed.is_set() and not self.shutdown.requested:
            self.producer.poll(0.1)
            if self._network_thread_alive():
                beat()
            if self.failure is not None or self.acks.blocked_by_failure:
                return True
            if COUNTS.ok + COUNTS.dlq != taken:
                taken, deadline = COUNTS.ok + COUNTS.dlq, Deadline(stall_s)
            elif deadline.expired():
                return False
        return True

    def _network_thread_alive(self) -> bool:
        """paho's loop thread runs the callbacks: if it died, the bridge takes nothing in (paho
        keeps the thread private; read defensively)."""
        thread = getattr(self.client, "_thread", None)
        return thread is not None and thread.is_alive()

    def _close(self, flush: bool) -> None:
        self.closing = True
        if flush:
            remaining = self.producer.flush(30)
            if remaining:
                log.error(
                    "records still unconfirmed after 30 s; their messages stay unacked",
                    extra={"records": remaining},
                )
        # Let the network thread write the queued PUBACKs before DISCONNECT: one that stays
        # queued makes the broker redeliver an acknowledged message (an identical re-send).
        try:
            wait_until(
                lambda: not self.client.want_write(), 5, "queued PUBACKs written", interval_s=0.01
            )
        except TimedOut:
            pass  # disconnect all the same: those messages are redelivered, identical
        self.client.disconnect()
        self.client.loop_stop()


@entry_point("mqtt_bridge")
def main(argv: list[str] | None = None) -> int:
    return run_service(
        "mqtt_bridge",
        BridgeSettings,
        __doc__,
        argv,
        lambda settings, shutdown: Bridge(settings, shutdown).run(),
    )


if __name__ == "__main__":
    sys.exit(main())
