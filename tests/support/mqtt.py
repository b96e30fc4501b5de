"""Publishing what no real machine would: for tests and fuzzing only."""

from __future__ import annotations

from simulator.publisher import MqttPublisher


class RawPublisher(MqttPublisher):
    """The simulator's publisher, plus any bytes to any topic (bounded by the same in-flight
    window, over the first connection)."""

    def publish_raw(self, topic: str, payload: bytes) -> None:
        self._window.acquire()
        self.clients[0].publish(topic, payload, qos=1)
