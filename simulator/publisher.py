"""Publishing rows over one or more MQTT connections (QoS 1).

Each Thing always goes over the same connection, so its rows keep their order end to end;
several connections only add parallelism across Things. In-flight messages are bounded
(a semaphore released by PUBACKs), so memory stays flat however fast the file is read.

With MQTT_MACHINE_IDENTITIES each Thing logs in as its own machine user, over a connection of
its own opened when its first row comes (the broker lets that user publish to its topic only).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import zlib
from datetime import timedelta

import paho.mqtt.client as mqtt

from simulator.errors import MachineUserMissing
from streamkit.config import MqttSettings
from streamkit.deadline import TimedOut, wait_until
from streamkit.mqtt_client import REACH_PATIENCE_S, connect_patiently, make_client
from streamkit.wire.keys import machine_topic


class MqttPublisher:
    def __init__(
        self,
        settings: MqttSettings,
        connections: int = 1,
        max_inflight: int = 1000,
        client_prefix: str = "simulator",
        shards: int = 1,
        reach_timeout: timedelta = timedelta(seconds=REACH_PATIENCE_S),
    ) -> None:
        self.settings = settings
        self.reach_timeout_s = reach_timeout.total_seconds()
        self.prefix = settings.mqtt_topic_prefix
        self.shards = shards
        self.client_prefix = client_prefix
        self._window = threading.BoundedSemaphore(max_inflight)
        self._acked = 0
        self._acked_lock = threading.Lock()
        self.clients: list[mqtt.Client] = []
        self._stamp = int(time.time() * 1000) % 10**8
        #: MQTT_MACHINE_IDENTITIES: each Thing's own connection, logged in as the Thing
        self._own: dict[str, mqtt.Client] | None = {} if settings.mqtt_machine_identities else None
        if self._own is None:
            for index in range(connections):
                self.clients.append(self._connected(settings, f"{index}"))
        self._topics: dict[str, str] = {}

    def _connected(self, settings: MqttSettings, name: str) -> mqtt.Client:
        client = make_client(settings, f"{self.client_prefix}-{name}-{self._stamp}", mqtt5=False)
        # 0 = unlimited inside paho (our semaphore bounds the window): with a limit set, paho
        # rescans every pending message on each PUBACK, which made publishing 20x slower.
        client.max_inflight_messages_set(0)
        client.max_queued_messages_set(0)
        client.on_publish = self._on_publish
        # a Thing's own connection opens when its first row comes, maybe while the network or the
        # broker restarts: a moment's failure must not end the replay
        connect_patiently(client, settings, self.reach_timeout_s)
        return client

    def _client_of(self, thing: str) -> mqtt.Client:
        if self._own is None:
            return self.clients[zlib.crc32(thing.encode()) % len(self.clients)]
        client = self._own.get(thing)
        if client is None:
            password = self.settings.machine_password(thing)
            if not password:
                raise MachineUserMissing(
                    f"no MQTT password for Thing {thing!r} in "
                    f"{self.settings.machine_credentials_path} (MQTT_MACHINE_IDENTITIES): make "
                    "its user with python -m stacktools.stack machine-user (--events FILE for "
                    "every Thing of a file)"
                )
            own = dataclasses.replace(self.settings, mqtt_username=thing, mqtt_password=password)
            client = self._own[thing] = self._connected(own, f"t{len(self._own)}")
            self.clients.append(client)
        return client

    def _on_publish(
        self, _c: mqtt.Client, _u: object, _mid: int, _reason: object, _props: object
    ) -> None:
        with self._acked_lock:
            self._acked += 1
        self._window.release()

    @property
    def acked(self) -> int:
        return self._acked

    def publish(self, thing: str, payload: bytes) -> None:
        topic = self._topics.get(thing)
        if topic is None:
            topic = self._topics[thing] = machine_topic(self.prefix, thing, self.shards)
        client = self._client_of(thing)
        self._window.acquire()
        client.publish(topic, payload, qos=1)

    def wait_all_acked(self, published: int, timeout_s: float = 120.0) -> bool:
        """Whether the broker acknowledged all ``published`` in time: the caller reports it."""
        try:
            wait_until(
                lambda: self._acked >= published, timeout_s, f"{published} PUBACKs", interval_s=0.05
            )
        except TimedOut:
            pass
        return self._acked >= published

    def close(self) -> None:
        for client in self.clients:
            client.disconnect()
            client.loop_stop()
