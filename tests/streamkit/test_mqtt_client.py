"""The buffered paho client's coalesced writes: every queued byte leaves once, in order,
whatever the socket accepts per call (partial sends, would-block)."""
from __future__ import annotations

import random

import paho.mqtt.client as mqtt
from hypothesis import HealthCheck, given, settings, strategies as st

from streamkit.mqtt_client import BufferedClient


class ChokingSocket:
    """Accepts a random number of bytes per send, sometimes none (would block)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sent = bytearray()
        self.calls = 0

    def close(self) -> None:
        pass

    def send(self, data: bytes) -> int:
        self.calls += 1
        if self.rng.random() < 0.2:
            raise BlockingIOError
        n = self.rng.randint(1, len(data))
        self.sent += data[:n]
        return n


def client_with(sock: ChokingSocket) -> BufferedClient:
    client = BufferedClient(mqtt.CallbackAPIVersion.VERSION2, client_id="t", protocol=mqtt.MQTTv311)
    client._sock = sock  # type: ignore[assignment]
    client._thread = object()  # type: ignore[assignment]  # "threaded": queueing does not write by itself
    return client


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.large_base_example])
@given(st.lists(st.tuples(st.sampled_from(["puback", "qos1", "qos0"]), st.binary(min_size=1, max_size=40)),
                min_size=1, max_size=40),
       st.randoms(use_true_random=False))
def test_queued_packets_leave_whole_and_in_order(packets: list[tuple[str, bytes]], rng: random.Random) -> None:
    sock = ChokingSocket(rng)
    client = client_with(sock)
    published: list[int] = []
    client.on_publish = lambda _c, _u, mid, _r, _p: published.append(mid)
    expected = b""
    for mid, (kind, body) in enumerate(packets, start=1):
        command = mqtt.PUBACK if kind == "puback" else mqtt.PUBLISH
        qos = 0 if kind == "qos0" else 1
        info = mqtt.MQTTMessageInfo(mid) if command == mqtt.PUBLISH else None
        client._packet_queue(command, body, mid, qos, info)
        expected += body
    for _ in range(10_000):
        if not client._out_packet:
            break
        client._packet_write()
    assert bytes(sock.sent) == expected
    # QoS 0 publishes still get paho's after-write callback, once each
    assert published == [mid for mid, (kind, _b) in enumerate(packets, start=1) if kind == "qos0"]


def test_a_run_of_acks_goes_out_in_one_send() -> None:
    sock = ChokingSocket(random.Random(0))
    sock.rng = type("AlwaysAll", (), {"random": lambda self: 1.0, "randint": lambda self, a, b: b})()
    client = client_with(sock)
    for mid in range(1, 501):
        client._send_puback(mid)
    client._packet_write()
    assert sock.calls == 1 and len(sock.sent) == 500 * 4
