"""A Kafka produce quota on one client of one user: a slow outlet made by the broker itself.

Kafka throttles a client that produces faster than its ``producer_byte_rate`` (it delays its
responses), which is what a busy or rate-limited cluster does to a real producer. The quota is
set on the pair (user, client id), so it slows exactly one test's client and nobody else on
the shared broker. librdkafka's admin API has no client quotas, so Kafka's own tool
(``kafka-configs``, i.e. ``kafka.admin.ConfigCommand``) sets them, as the admin user.
"""

from __future__ import annotations

import subprocess
import uuid

from stacktools.stack.settings import Settings
from streamkit.kafka_clients import java_client_properties
from streamkit.paths import KAFKA_JARS_DIR, private_file

#: A JVM start and one admin request; generous for a loaded two-core machine.
TOOL_TIMEOUT_S = 120


def _config_command(settings: Settings, *args: str) -> str:
    """Run kafka-configs as the admin; its output. The admin's password goes in a private file
    of the run dir (0600 from its first byte, removed afterwards), given with --command-config:
    never on a command line other users can read. With TLS the tool verifies the stack's CA."""
    properties = java_client_properties(settings.acting_as("kafka", "admin"))
    properties.pop("bootstrap.servers")  # given as --bootstrap-server
    command_config = settings.run_dir / f"kafka-configs-{uuid.uuid4().hex[:8]}.properties"
    try:
        with private_file(command_config) as out:
            out.write("".join(f"{k}={v}\n" for k, v in properties.items()).encode())
        result = subprocess.run(
            [
                "java",
                "-Xmx256m",
                "-XX:TieredStopAtLevel=1",
                "-cp",
                f"{KAFKA_JARS_DIR}/*",
                "kafka.admin.ConfigCommand",
                "--bootstrap-server",
                settings.bootstrap_servers,
                "--command-config",
                str(command_config),
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
        )
    finally:
        command_config.unlink(missing_ok=True)
    if result.returncode != 0:
        raise RuntimeError(
            f"kafka-configs {' '.join(args)} failed:\n{result.stdout}\n{result.stderr[-2000:]}"
        )
    return result.stdout


def _entity(user: str, client_id: str) -> list[str]:
    return [
        "--entity-type",
        "users",
        "--entity-name",
        user,
        "--entity-type",
        "clients",
        "--entity-name",
        client_id,
    ]


def set_produce_quota(settings: Settings, user: str, client_id: str, bytes_per_s: int) -> None:
    _config_command(
        settings,
        "--alter",
        "--add-config",
        f"producer_byte_rate={bytes_per_s}",
        *_entity(user, client_id),
    )


def remove_produce_quota(settings: Settings, user: str, client_id: str) -> None:
    _config_command(
        settings, "--alter", "--delete-config", "producer_byte_rate", *_entity(user, client_id)
    )


def produce_quota(settings: Settings, user: str, client_id: str) -> float | None:
    """The quota in force for the pair (bytes/s), None without one."""
    out = _config_command(settings, "--describe", *_entity(user, client_id))
    for part in out.replace(",", " ").split():
        if part.startswith("producer_byte_rate="):
            return float(part.split("=", 1)[1])
    return None


class ProduceQuota:
    """The quota while the ``with`` block runs; :meth:`lift` ends it earlier (once either way)."""

    def __init__(self, settings: Settings, user: str, client_id: str, bytes_per_s: int) -> None:
        self.settings, self.user, self.client_id, self.bytes_per_s = (
            settings,
            user,
            client_id,
            bytes_per_s,
        )
        self.in_force = False

    def __enter__(self) -> ProduceQuota:
        set_produce_quota(self.settings, self.user, self.client_id, self.bytes_per_s)
        self.in_force = True
        return self

    def lift(self) -> None:
        if self.in_force:
            remove_produce_quota(self.settings, self.user, self.client_id)
            self.in_force = False

    def __exit__(self, *_exc: object) -> None:
        self.lift()
