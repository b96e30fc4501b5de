"""MQTT client setup shared by the simulator and the bridge (paho-mqtt 2.x, auth, TLS).

Every MQTT client of the project is made by ``make_client``: with TLS on it speaks TLS 1.2 or
later and verifies the broker's certificate against TLS_CA_FILE, host name included.

The services speak MQTT 3.1.1 by default (the simulator always, the bridge unless
``BRIDGE_MQTT5``), because paho parses it faster; ``make_client`` itself defaults to MQTT 5
for the tools and tests, which want its reason codes."""

from __future__ import annotations

import math
import select
import socket
import threading
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import _ConnectionState
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from streamkit.config import MqttSettings
from streamkit.deadline import Backoff, Deadline
from streamkit.errors import MqttConnectError
from streamkit.tls import client_context

if TYPE_CHECKING:  # paho declares its queued-packet type for type checkers only
    from paho.mqtt.client import _OutPacket


#: Seconds between a client's signs of life: a link silent for longer is dropped by the client,
#: and for half as long again by the broker.
KEEPALIVE_S = 30


class BufferedClient(mqtt.Client):
    """paho's Client with a read buffer.

    paho reads every packet with two to four ``recv`` calls (command byte, length bytes one by
    one, body); at tens of thousands of small packets per second those syscalls were the largest
    cost of both the simulator (PUBACKs) and the bridge (PUBLISHes). Here one ``recv`` fills a
    buffer that paho's reads are served from, and ``loop_read`` drains the buffer before it
    returns, because the socket's readiness no longer says whether buffered bytes remain."""

    _READ_SIZE = 256 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # paho's own parameters
        super().__init__(*args, **kwargs)
        self._read_buffer = b""
        self._read_pos = 0

    def _sock_recv(self, bufsize: int) -> bytes:
        if self._read_pos >= len(self._read_buffer):
            # BlockingIOError / b"" (closed) pass through
            data = super()._sock_recv(self._READ_SIZE)
            if not data:
                return data
            if self._ssl:
                data = self._more_records(data)
            self._read_buffer, self._read_pos = data, 0
        start = self._read_pos
        self._read_pos = min(start + bufsize, len(self._read_buffer))
        return self._read_buffer[start : self._read_pos]

    def _more_records(self, data: bytes) -> bytes:
        """Over TLS one ``recv`` returns one record, and Mosquitto writes each packet (a PUBACK:
        4 bytes) as a record of its own: read on while records are there, so that a burst is
        still one pass of paho's loop. paho's would-block (OpenSSL's WANT_READ, or WANT_WRITE,
        which it has registered) or an error ends the pass; the error comes again on the next
        read, after the bytes read before it were handled."""
        chunks, size = [data], len(data)
        while size < self._READ_SIZE:
            try:
                more = super()._sock_recv(self._READ_SIZE - size)
            except OSError:  # BlockingIOError included
                break
            if not more:
                break
            chunks.append(more)
            size += len(more)
        return b"".join(chunks) if len(chunks) > 1 else data

    def _buffered(self) -> bool:
        return self._read_pos < len(self._read_buffer)

    def loop_read(self, max_packets: int = 1) -> mqtt.MQTTErrorCode:
        rc = super().loop_read(max_packets)
        while (
            rc == mqtt.MQTTErrorCode.MQTT_ERR_SUCCESS
            and self._buffered()
            and self._sock is not None
        ):
            rc = super().loop_read(max_packets)
        return rc

    # ------------------------------------------------------------------ writes
    # paho queues every outgoing packet (a PUBLISH of the simulator, a PUBACK of the bridge) with
    # a wake-up byte to its network thread and writes it with a ``send`` of its own: two
    # syscalls and a thread hand-over per packet. Here a wake-up is sent only when none is
    # pending, and the network thread writes every queued packet that needs no after-write
    # handling in one ``send``.
    _WRITE_SIZE = 256 * 1024
    _write_poked = False

    def _packet_queue(
        self,
        command: int,
        packet: bytes | bytearray,
        mid: int,
        qos: int,
        info: mqtt.MQTTMessageInfo | None = None,
    ) -> mqtt.MQTTErrorCode:
        self._out_packet.append(
            {
                "command": command,
                "mid": mid,
                "qos": qos,
                "pos": 0,
                "to_process": len(packet),
                "packet": packet,
                "info": info,
            }
        )
        # Set before the network thread takes packets (see _packet_write), so a packet queued
        # after that point always pokes again: none can be left waiting without a wake-up.
        if self._sockpairW is not None and not self._write_poked:
            self._write_poked = True
            try:
                self._sockpairW.send(mqtt.sockpair_data)
            except BlockingIOError:
                pass
        if (
            self._thread is None
            and self._on_socket_register_write is None
            and self._in_callback_mutex.acquire(False)
        ):
            self._in_callback_mutex.release()
            return self.loop_write()
        self._call_socket_register_write()
        return mqtt.MQTTErrorCode.MQTT_ERR_SUCCESS

    @staticmethod
    def _plain(packet: _OutPacket) -> bool:
        """Needs nothing after its bytes are written (paho's own path runs callbacks for QoS 0
        PUBLISH and closes the socket after DISCONNECT)."""
        kind = packet["command"] & 0xF0
        return kind != mqtt.DISCONNECT and not (kind == mqtt.PUBLISH and packet["qos"] == 0)

    def _packet_write(self) -> mqtt.MQTTErrorCode:
        self._write_poked = False
        queue = self._out_packet
        while True:
            run: list[_OutPacket] = []
            size = 0
            while queue and size < self._WRITE_SIZE and self._plain(queue[0]):
                packet = queue.popleft()
                run.append(packet)
                size += packet["to_process"]
            if not run:
                return super()._packet_write() if queue else mqtt.MQTTErrorCode.MQTT_ERR_SUCCESS
            # join() takes paho's bytearrays as they are; only a partly written head is sliced
            data = b"".join(p["packet"][p["pos"] :] if p["pos"] else p["packet"] for p in run)
            try:
                written = self._sock_send(data)
            except (AttributeError, ValueError):
                queue.extendleft(reversed(run))
                return mqtt.MQTTErrorCode.MQTT_ERR_SUCCESS
            except BlockingIOError:
                queue.extendleft(reversed(run))
                return mqtt.MQTTErrorCode.MQTT_ERR_AGAIN
            except OSError as err:
                queue.extendleft(reversed(run))
                self._easy_log(mqtt.MQTT_LOG_ERR, "failed to send on socket: %s", err)
                return mqtt.MQTTErrorCode.MQTT_ERR_CONN_LOST
            for index, packet in enumerate(run):
                step = min(written, packet["to_process"])
                packet["pos"] += step
                packet["to_process"] -= step
                written -= step
                if packet["to_process"]:  # a partial write: the rest goes first next time
                    queue.extendleft(reversed(run[index:]))
                    break
            with self._msgtime_mutex:
                self._last_msg_out = mqtt.time_func()

    # ------------------------------------------------------------------ keepalive
    def loop_misc(self) -> mqtt.MQTTErrorCode:
        """paho drops the connection when a PINGRESP has not come within the keepalive of its
        PINGREQ. But the broker answers in order: behind a backlog of PUBLISHes it sent before
        (up to its in-flight window towards the bridge, read at Kafka's pace) the answer can
        take longer than the keepalive while the broker talks all the time. Dropping then makes
        it redeliver everything unacknowledged. So bytes read after the PINGREQ count as the
        broker's answer; a broker that says nothing for a keepalive is still dropped."""
        if self._ping_t and self._keepalive:
            now = mqtt.time_func()
            with self._msgtime_mutex:
                heard_s = now - self._last_bytes_received
            if now - self._ping_t >= self._keepalive and heard_s < self._keepalive:
                self._ping_t = 0  # answered; the next PINGREQ goes when paho's rule says
        return super().loop_misc()

    # ------------------------------------------------------------------ waiting in a callback
    def keep_alive_in_callback(self) -> bool:
        """For a callback of the network thread that waits (the bridge's backpressure while
        Kafka stalls): write what is queued (PUBACKs) and, when nothing went out for half the
        keepalive, a PINGREQ. Otherwise the broker hears nothing for 1.5 keepalives, drops the
        connection and, on the resumed session, sends everything unacknowledged again. Only
        the network thread may call this: it writes to the socket.

        False when the connection is gone: the callback should end, and paho's loop reports
        the loss once it has. paho's own ``loop_write`` would report it from here, and its
        ``on_disconnect`` waits for the callback lock this callback holds: the thread hung."""
        if self._sock is None or self._state != _ConnectionState.MQTT_CS_CONNECTED:
            return False
        with self._msgtime_mutex:
            idle_s = mqtt.time_func() - self._last_msg_out
        if self._keepalive and idle_s >= self._keepalive / 2:
            self._send_pingreq()
        # only packets without after-write callbacks: those (QoS 0, DISCONNECT) take the lock too
        if self._out_packet and self._plain(self._out_packet[0]):
            rc = self._packet_write()
            return rc in (mqtt.MQTTErrorCode.MQTT_ERR_SUCCESS, mqtt.MQTTErrorCode.MQTT_ERR_AGAIN)
        return True

    # ------------------------------------------------------------------ close
    #: How long a wanted disconnect waits for the broker to close its side (it has then read
    #: everything we sent); past that the socket is closed all the same.
    LINGER_S = 5.0

    def _sock_close(self) -> None:
        """After our own DISCONNECT: a graceful close. Closing a socket whose receive buffer still
        holds unread bytes (under a flood: PUBLISHes the broker sent after our last read) makes
        the kernel send RST instead of FIN. Mosquitto's next write to us then fails and it drops
        the connection with what it had not read yet: our last PUBACKs (4 bytes each: under a
        flood thousands wait in its buffer, as tests/mqtt_bridge/test_flood.py shows) and the
        DISCONNECT itself. It then redelivers messages we had acknowledged. So: FIN first, and
        read (discarding: unacknowledged, they are redelivered) until the broker, having read it
        all, closes too."""
        sock = self._sock
        # paho's socket is a real one (or TLS, a subclass) for TCP; a websocket wrapper cannot
        # half-close, so it is closed at once as paho would
        if (
            isinstance(sock, socket.socket)
            and self._state == _ConnectionState.MQTT_CS_DISCONNECTING
        ):
            if not linger_close(sock, self.LINGER_S):
                self._easy_log(
                    mqtt.MQTT_LOG_WARNING,
                    "the broker did not close within %s s: our last "
                    "acknowledgements may be lost (those messages come again)",
                    self.LINGER_S,
                )
        super()._sock_close()

    def reconnect(self) -> mqtt.MQTTErrorCode:
        self._read_buffer, self._read_pos = b"", 0  # bytes of the old connection mean nothing now
        self._write_poked = False  # a wake-up consumed while disconnected wrote nothing
        return super().reconnect()


def linger_close(sock: socket.socket, timeout_s: float) -> bool:
    """Send FIN, then read and discard until the peer closes (it has read all we sent) or
    ``timeout_s`` passes; True when the peer closed. The caller closes the socket.

    Over TLS the same: ``SSLSocket.shutdown`` leaves the TLS layer (no close_notify) and
    half-closes the TCP connection behind our last record, and the reads after it take the
    broker's records as raw bytes, thrown away unread. A close_notify would buy nothing and
    cannot be waited for: the DISCONNECT before it already ends the MQTT session (Mosquitto
    closes on reading it, so it never reads past it), and once we sent close_notify OpenSSL
    refuses the broker's further records (APPLICATION_DATA_AFTER_CLOSE_NOTIFY), which a flood
    keeps sending until it has read our DISCONNECT (tests/streamkit/test_mqtt_client.py)."""
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:  # already reset or closed: nothing left to save
        return False
    deadline = Deadline(timeout_s)
    while not deadline.expired():
        try:
            readable, _, _ = select.select([sock], [], [], min(0.5, deadline.remaining()))
            if readable and not sock.recv(256 * 1024):
                return True
        except BlockingIOError:
            continue
        except OSError:
            return False
    return False


def make_client(
    settings: MqttSettings,
    client_id: str = "",
    *,
    persistent_session: bool = False,
    session_expiry: timedelta = timedelta(days=7),
    mqtt5: bool = True,
) -> BufferedClient:
    """A client with credentials set; a persistent session keeps QoS 1 messages for us while
    we are down (fixed client id, clean start off, session expiry).

    ``mqtt5=False`` speaks MQTT 3.1.1, which paho parses faster (no properties per packet;
    docs/performance.md, "MQTT bridge"); its persistent session (clean session off) then lasts
    until the broker's ``persistent_client_expiration``. MQTT counts the expiry in whole
    seconds: a fraction is rounded up, so the session never ends sooner than asked."""
    client = BufferedClient(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=client_id,
        protocol=mqtt.MQTTv5 if mqtt5 else mqtt.MQTTv311,
        # MQTT 5 takes no clean session (None, paho's default): its CONNECT says clean start
        clean_session=None if mqtt5 else not persistent_session,
    )
    client.username_pw_set(settings.mqtt_username, settings.mqtt_password.reveal() or None)
    expiry_s = math.ceil(session_expiry.total_seconds())
    client.user_data_set({"persistent": persistent_session, "expiry": expiry_s})
    context = client_context(settings)
    if context is not None:
        client.tls_set_context(context)
    return client


def connect(client: mqtt.Client, settings: MqttSettings, timeout_s: float = 10.0) -> None:
    """Connect and wait for CONNACK; raise with the broker's reason instead of retrying forever."""
    done = threading.Event()
    outcome: dict[str, mqtt.ReasonCode] = {}
    closed: list[mqtt.ReasonCode] = []

    def on_connect(
        _c: mqtt.Client, _u: object, _flags: object, reason: mqtt.ReasonCode, _p: object
    ) -> None:
        outcome["reason"] = reason
        done.set()

    def on_disconnect(
        _c: mqtt.Client, _u: object, _f: object, reason: mqtt.ReasonCode, _p: object
    ) -> None:
        if "reason" not in outcome:  # closed before any CONNACK (e.g. a TLS port spoken to plain)
            closed.append(reason)
            done.set()

    previous, previous_disconnect = client.on_connect, client.on_disconnect
    client.on_connect, client.on_disconnect = on_connect, on_disconnect
    userdata = client.user_data_get() or {}
    if client.protocol == mqtt.MQTTv5:
        properties = None
        clean_start: mqtt.CleanStartOption = mqtt.MQTT_CLEAN_START_FIRST_ONLY
        if userdata.get("persistent"):
            properties = Properties(PacketTypes.CONNECT)
            properties.SessionExpiryInterval = int(userdata["expiry"])
            clean_start = False
        client.connect(
            settings.mqtt_host,
            settings.mqtt_port,
            keepalive=KEEPALIVE_S,
            clean_start=clean_start,
            properties=properties,
        )
    else:
        client.connect(settings.mqtt_host, settings.mqtt_port, keepalive=KEEPALIVE_S)
    client.loop_start()
    if not done.wait(timeout_s):
        client.loop_stop()
        raise MqttConnectError(
            f"no CONNACK from {settings.mqtt_host}:{settings.mqtt_port} within {timeout_s}s"
        )
    client.on_connect, client.on_disconnect = previous, previous_disconnect
    if closed:
        client.loop_stop()
        raise MqttConnectError(
            f"{settings.mqtt_host}:{settings.mqtt_port} closed the connection before its CONNACK"
            + ("" if settings.tls else " (a TLS listener? then set TLS=true)")
        )
    reason = outcome["reason"]
    if getattr(reason, "is_failure", False):
        client.loop_stop()
        client.disconnect()
        raise MqttConnectError(f"MQTT broker refused the connection: {reason}", reason)


#: How long :func:`connect_patiently` keeps trying to reach a broker.
REACH_PATIENCE_S = 30.0


def connect_patiently(
    client: mqtt.Client, settings: MqttSettings, patience_s: float = REACH_PATIENCE_S
) -> None:
    """:func:`connect`, tried again after a back-off while the broker cannot be reached (its name
    does not resolve, the connection is refused, or it is cut before any CONNACK: a broker or
    the network restarting), for ``patience_s`` at most; then the last error is raised. A broker
    that answers and refuses (a CONNACK with a failure: bad credentials, not authorised) is
    raised at once, since trying again cannot change its answer."""
    deadline, backoff = Deadline(patience_s), Backoff(initial_s=0.5, max_s=5.0)
    while True:
        try:
            connect(client, settings)
            return
        except MqttConnectError as exc:
            if exc.reason is not None or deadline.expired():
                raise
        except OSError:
            if deadline.expired():
                raise
        backoff.sleep(deadline)
