"""A Mosquitto of a test's own, started by the launcher in a run directory of its own, for what
the session's stack must not be switched to (TLS whatever TLS the session runs with, a machine
user per Thing, tiny queue bounds). It has the stack's MQTT passwords and presents the stack's
server certificate (its CA made if the stack runs without TLS), so the stack's services (the
bridge) can be pointed at it with :func:`service_env`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from stacktools.stack import Stack, certs
from stacktools.stack.process import free_port
from stacktools.stack.settings import Settings
from streamkit.config import CREDENTIALS_FILE
from streamkit.paths import private_directory, private_file


@contextlib.contextmanager
def private_mosquitto(stack_settings: Settings, run_dir: Path, **env: str) -> Iterator[Settings]:
    """Started in ``run_dir`` on a free port, with ``env`` (e.g. ``TLS="true"``) on top of this
    process's environment; yields its settings (as the admin) and stops it afterwards."""
    shared = certs.ensure(stack_settings)
    private_directory(run_dir)
    with private_file(run_dir / CREDENTIALS_FILE) as out:
        out.write(stack_settings.credentials_path.read_bytes())
    environ = {
        **os.environ,
        "STACK_RUN_DIR": str(run_dir),
        "MQTT_PORT": str(free_port()),
        "TLS_CA_FILE": str(shared.ca),
        "TLS_SERVER_CERT_FILE": str(shared.server_cert),
        "TLS_SERVER_KEY_FILE": str(shared.server_key),
        **env,
    }
    stack = Stack(Settings.from_sources(environ), ["mosquitto"])
    try:
        yield stack.up()
    finally:
        stack.down()


def service_env(stack_settings: Settings, mosquitto: Settings) -> dict[str, str]:
    """A service of the session's stack (its run dir, Kafka) with MQTT on ``mosquitto``."""
    return {
        "MQTT_PORT": str(mosquitto.mqtt_port),
        "MQTT_TOPIC_PREFIX": mosquitto.mqtt_topic_prefix,
        "MQTT_MACHINE_IDENTITIES": "true" if mosquitto.mqtt_machine_identities else "false",
        "TLS": "true" if mosquitto.tls else "false",
        "TLS_CA_FILE": str(mosquitto.ca_path),
        # Kafka as the session's stack speaks it, whatever TLS says for MQTT
        "KAFKA_SECURITY_PROTOCOL": stack_settings.kafka_protocol,
    }
