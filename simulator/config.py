"""The simulator's settings: the service base and MQTT, plus how it publishes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from streamkit.config import MqttSettings
from streamkit.fields import login_as, serves_metrics_on, setting

#: How rows are replayed: sorted by event time, or as the file has them.
ORDERS = ("event-time", "file")


@dataclass(frozen=True)
class SimulatorSettings(MqttSettings):
    """Publishes to MQTT only: no Kafka, InfluxDB or launcher settings."""

    mqtt_username: str = login_as("mqtt", "machine")
    metrics_port: int = serves_metrics_on(9201)
    connections: int = setting(
        1,
        "SIMULATOR_CONNECTIONS",
        "parallel MQTT connections (a Thing always uses the same one; with "
        "MQTT_MACHINE_IDENTITIES one per Thing instead, logged in as the Thing)",
    )
    shards: int = setting(
        1,
        "SIMULATOR_SHARDS",
        "sharded bridges to publish for: Thing X goes to <prefix>/<crc32(X) mod N>/X "
        "(1: <prefix>/X)",
    )
    reach_timeout: timedelta = setting(
        timedelta(minutes=5),
        "SIMULATOR_REACH_TIMEOUT",
        "how long a connection keeps trying to reach the MQTT broker (its name not resolving, "
        "refused, closed before CONNACK) before the replay gives up: longer than a broker's or "
        "the network's restart",
    )
    max_inflight: int = setting(
        1000,
        "SIMULATOR_MAX_INFLIGHT",
        "unacknowledged QoS 1 messages at most (keep below the broker's receive maximum)",
    )
    linger: timedelta = setting(
        timedelta(0),
        "SIMULATOR_LINGER",
        "keep /metrics up this long after the replay, so that a scraper sees the final counts "
        "of a replay shorter than its interval",
        allow_zero=True,
        was="SIMULATOR_LINGER_S",
    )
    input: str = setting(
        "",
        "SIMULATOR_INPUT",
        "events file to replay (JSON lines or a JSON array; UTF-8; gzip too); required",
    )
    rate: float = setting(
        0.0, "SIMULATOR_RATE", "fixed rows per second (0: as fast as possible; excludes --speed)"
    )
    speed: float = setting(
        0.0,
        "SIMULATOR_SPEED",
        "replay event time N times faster than real time (0: off; excludes --rate)",
    )
    order: str = setting(
        "event-time",
        "SIMULATOR_ORDER",
        "event-time (sorts, spilling to disk for big files) or file order",
    )
    loops: int = setting(1, "SIMULATOR_LOOPS", "replay the file this many times (0: until stopped)")
    shift_per_loop: bool = setting(
        False,
        "SIMULATOR_SHIFT_PER_LOOP",
        "move each further loop's event time past the previous loop's (new data, not a replay)",
    )
    live: bool = setting(
        False,
        "SIMULATOR_LIVE",
        "stamp each row with the wall clock when it is published (strictly increasing per Thing), "
        "so the replay looks like live machines: event-to-dashboard latency is then measurable",
    )
    sort_chunk_rows: int = setting(
        500_000, "SIMULATOR_SORT_CHUNK_ROWS", "rows sorted in memory before spilling"
    )
    progress: bool = setting(
        True, "SIMULATOR_PROGRESS", "progress bar (--no-progress: periodic status lines instead)"
    )

    @property
    def input_path(self) -> Path:
        return Path(self.input).expanduser()

    def check(self) -> None:
        """What one field alone cannot say: raises ValueError (a usage error at start-up)."""
        if not self.input:
            raise ValueError("--input (SIMULATOR_INPUT) is required")
        if self.rate and self.speed:
            raise ValueError(
                "--rate and --speed exclude each other (SIMULATOR_RATE, SIMULATOR_SPEED): "
                "choose one pace"
            )
        if self.shards < 1:
            raise ValueError(f"--shards (SIMULATOR_SHARDS) must be at least 1, not {self.shards}")
        if self.order not in ORDERS:
            raise ValueError(f"--order must be one of {', '.join(ORDERS)}, not {self.order!r}")
