"""MQTT client setup shared by the simulator and the bridge (paho-mqtt 2.x, MQTT 5, auth)."""
from __future__ import annotations

import threading

import paho.mqtt.client as mqtt
from paho.mqtt.properties import Properties
from paho.mqtt.packettypes import PacketTypes

from streamkit.config import Settings


class MqttConnectError(RuntimeError):
    pass


def make_client(settings: Settings, client_id: str = "", *, persistent_session: bool = False,
                session_expiry_s: int = 7 * 24 * 3600) -> mqtt.Client:
    """A client with credentials set; a persistent session keeps QoS 1 messages for us while
    we are down (fixed client id, clean start off, session expiry)."""
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv5)
    client.username_pw_set(settings.mqtt_username, settings.mqtt_password or None)
    client.user_data_set({"persistent": persistent_session, "expiry": session_expiry_s})
    return client


def connect(client: mqtt.Client, settings: Settings, timeout_s: float = 10.0) -> None:
    """Connect and wait for CONNACK; raise with the broker's reason instead of retrying forever."""
    done = threading.Event()
    outcome: dict[str, object] = {}

    def on_connect(_c: mqtt.Client, _u: object, _flags: object, reason: mqtt.ReasonCode, _p: object) -> None:
        outcome["reason"] = reason
        done.set()

    previous = client.on_connect
    client.on_connect = on_connect
    userdata = client.user_data_get() or {}
    properties = None
    clean_start: bool | int = mqtt.MQTT_CLEAN_START_FIRST_ONLY
    if userdata.get("persistent"):
        properties = Properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = int(userdata["expiry"])
        clean_start = False
    client.connect(settings.mqtt_host, settings.mqtt_port, keepalive=30, clean_start=clean_start, properties=properties)
    client.loop_start()
    if not done.wait(timeout_s):
        client.loop_stop()
        raise MqttConnectError(f"no CONNACK from {settings.mqtt_host}:{settings.mqtt_port} within {timeout_s}s")
    client.on_connect = previous
    reason = outcome["reason"]
    if getattr(reason, "is_failure", False):
        client.loop_stop()
        client.disconnect()
        raise MqttConnectError(f"MQTT broker refused the connection: {reason}")
