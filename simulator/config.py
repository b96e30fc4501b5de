"""The simulator's settings: the shared model plus how it publishes."""
from __future__ import annotations

from dataclasses import dataclass

from streamkit.config import Settings, login_as, serves_metrics_on, setting


@dataclass(frozen=True)
class SimulatorSettings(Settings):
    mqtt_username: str = login_as("mqtt", "machine")
    metrics_port: int = serves_metrics_on(9201)
    connections: int = setting(1, "SIMULATOR_CONNECTIONS", "parallel MQTT connections (a Thing always uses the same one)")
    max_inflight: int = setting(1000, "SIMULATOR_MAX_INFLIGHT", "unacknowledged QoS 1 messages at most (keep below the broker's receive maximum)")
    linger_s: float = setting(0.0, "SIMULATOR_LINGER_S", "keep /metrics up this long after the replay, so that a scraper sees the final counts of a replay shorter than its interval")
