"""Kafka over TLS on the real broker: SASL_SSL on the client and controller listeners with the
stack's CA, and the three refusals (plaintext, unknown CA, wrong host name) seen in librdkafka's
own errors; the Java side (kafka-configs) verifies the CA too; and no Kafka password on any
command line (the storage format's SCRAM user goes through a Java argument file).

When the session's Kafka speaks TLS (``TLS=true``, the default once every server speaks it, or
``KAFKA_SECURITY_PROTOCOL=SASL_SSL``) the checks run on it; otherwise on a broker of their own
started with TLS for this module.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from stacktools.stack import Stack, certs, ensure_credentials
from stacktools.stack.servers import kafka as kafka_server
from stacktools.stack.servers.kafka import Kafka, java_argument_file
from stacktools.stack.settings import Settings
from streamkit.deadline import wait_until
from streamkit.kafka_clients import client_config, idempotent_producer, uses_tls
from tests.support import kafka_quota
from tests.support.ports import free_ports
from tests.support.relay import RELAY_HOST, relay
from tests.support.require import cannot_run
from tests.support.server_checks import create_topic, read_all

#: A refused client gives up after this long (librdkafka retries within it).
REFUSAL_WAIT_S = 5.0


@pytest.fixture(scope="module")
def tls_kafka(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Settings]:
    """Settings of a Kafka broker that speaks TLS: the session's stack when its Kafka does (TLS
    on, or KAFKA_SECURITY_PROTOCOL=SASL_SSL), else one node started here (its own run dir and
    free ports), stopped afterwards."""
    if uses_tls(Settings.from_sources()):
        yield request.getfixturevalue("stack_settings")
        return
    client_port, controller_port = free_ports(2)
    environ = {
        **os.environ,
        "STACK_RUN_DIR": str(tmp_path_factory.mktemp("kafka-tls")),
        "TLS": "true",
        "KAFKA_BROKERS": "1",
        "KAFKA_PORT": str(client_port),
        "KAFKA_CONTROLLER_PORT": str(controller_port),
        "KAFKA_BOOTSTRAP_SERVERS": "",
        "KAFKA_SECURITY_PROTOCOL": "",
    }
    stack = Stack(Settings.from_sources(environ), ["kafka"])
    if problem := Kafka(stack.settings).missing_install():
        cannot_run(problem)
    try:
        yield stack.up()
    finally:
        stack.down()


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@dataclasses.dataclass
class Attempt:
    """What one admin client saw asking for metadata: answered or not, its error callbacks and
    log lines (librdkafka's FAIL lines say why a connection closed)."""

    answered: bool
    errors: list[KafkaError]
    log: list[str]
    seconds: float

    def ssl_errors(self) -> list[str]:
        return [error.str() for error in self.errors if error.code() == KafkaError._SSL]


def attempt(config: dict[str, Any]) -> Attempt:
    errors: list[KafkaError] = []
    lines = _Lines()
    logger = logging.getLogger(f"kafka-tls-check-{uuid.uuid4().hex[:8]}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(lines)
    watched: dict[str, Any] = {
        **config,
        "error_cb": errors.append,
        "logger": logger,
        "socket.timeout.ms": 3000,
        "reconnect.backoff.ms": 1000,
        "reconnect.backoff.max.ms": 1000,
    }
    client = AdminClient(watched)
    started = time.monotonic()
    try:
        client.list_topics(timeout=REFUSAL_WAIT_S)
        answered = True
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError._TRANSPORT, exc  # "broker transport failure"
        answered = False
    seconds = time.monotonic() - started
    client.poll(1)  # serves the error callbacks and the log lines
    return Attempt(answered, errors, lines.lines, seconds)


@pytest.mark.stack
def test_a_client_trusting_the_stack_s_ca_produces_and_consumes(tls_kafka: Settings) -> None:
    config = client_config(tls_kafka, "tls-check")
    assert config["security.protocol"] == "SASL_SSL"
    assert config["ssl.ca.location"] == str(tls_kafka.ca_path)
    assert config["ssl.endpoint.identification.algorithm"] == "https"
    topic = create_topic(tls_kafka)
    producer = idempotent_producer(tls_kafka, "tls-check")
    producer.produce(topic, value=b"over TLS", partition=0)
    assert producer.flush(30) == 0
    assert read_all(tls_kafka, topic, "read_committed") == [b"over TLS"]


@pytest.mark.stack
def test_a_plaintext_client_is_refused(tls_kafka: Settings) -> None:
    """SASL_PLAINTEXT to the TLS listener: its first request (ApiVersions, in clear) is not a
    TLS handshake, so the broker closes the connection before any SASL exchange; the password
    never leaves the client."""
    plain = dataclasses.replace(tls_kafka, kafka_security_protocol="SASL_PLAINTEXT")
    config = client_config(plain, "plaintext-check")
    assert "ssl.ca.location" not in config
    seen = attempt(config)
    assert not seen.answered and seen.seconds < REFUSAL_WAIT_S + 2
    closed = [
        line
        for line in seen.log
        if "connection closed by peer" in line and "in state APIVERSION_QUERY" in line
    ]
    assert closed, seen.log
    assert not any(
        error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL) for error in seen.errors
    ), seen.errors


@pytest.mark.stack
def test_a_client_trusting_another_ca_is_refused(tls_kafka: Settings, tmp_path: Path) -> None:
    other = certs.ensure(dataclasses.replace(tls_kafka, run_dir=tmp_path, tls_ca_file=""))
    assert other.ca.read_bytes() != tls_kafka.ca_path.read_bytes()
    seen = attempt({**client_config(tls_kafka, "other-ca-check"), "ssl.ca.location": str(other.ca)})
    assert not seen.answered
    assert seen.ssl_errors(), seen.errors
    assert all(
        "certificate verify failed" in error and "broker certificate could not be verified" in error
        for error in seen.ssl_errors()
    ), seen.ssl_errors()


@pytest.mark.stack
def test_a_client_reaching_the_broker_under_another_name_is_refused(tls_kafka: Settings) -> None:
    """Through the relay on 127.0.0.2, an address the certificate does not name. The control:
    the same client with host-name verification off is served through the same relay, so the
    CA and the path are fine and the name alone is refused."""
    with relay(tls_kafka.kafka_port) as port:
        address = f"{RELAY_HOST}:{port}"
        config = {
            **client_config(tls_kafka, "wrong-host-check"),
            "bootstrap.servers": address,
            "debug": "security",
        }
        seen = attempt(config)
        control = attempt({**config, "ssl.endpoint.identification.algorithm": "none"})
    assert not seen.answered
    assert seen.ssl_errors(), seen.errors
    assert all(
        f"{address}/bootstrap: SSL handshake failed" in error
        and "certificate verify failed" in error
        for error in seen.ssl_errors()
    ), seen.ssl_errors()
    assert any(
        f"Enabled endpoint identification using address {RELAY_HOST}" in line for line in seen.log
    ), seen.log
    assert control.answered and not control.ssl_errors(), control.errors


@pytest.mark.stack
def test_kafka_s_java_tool_verifies_the_ca_and_reads_its_password_from_a_private_file(
    tls_kafka: Settings,
) -> None:
    """kafka-configs as the admin over SASL_SSL (the properties of java_client_properties):
    a quota set, read back and removed; the command config it was given is gone afterwards."""
    client = f"tls-quota-{uuid.uuid4().hex[:6]}"
    with kafka_quota.ProduceQuota(tls_kafka, "bridge", client, 123_456):
        assert kafka_quota.produce_quota(tls_kafka, "bridge", client) == 123_456
    assert kafka_quota.produce_quota(tls_kafka, "bridge", client) is None
    assert not list(tls_kafka.run_dir.glob("kafka-configs-*.properties"))


# ----------------------------------------------------------------------------- no secret in argv
def test_java_argument_files_quote_every_character_back() -> None:
    text = java_argument_file("a b", 'p="x"\\y', "#not-a-comment", "tab\there")
    assert text.splitlines() == [
        '"a b"',
        '"p=\\"x\\"\\\\y"',
        '"#not-a-comment"',
        '"tab\\there"',
    ]


@pytest.mark.parametrize("tls", [False, True], ids=["plaintext", "tls"])
def test_storage_format_puts_no_password_on_the_command_line(
    tls: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real storage tool, run by prepare(): /proc/<pid>/cmdline of the running JVM (what
    `ps` shows every local user) holds `@<argument file>`, not the admin's password; that file
    is 0600 while the tool runs and removed afterwards; the configuration (with the JAAS
    passwords) is 0600 in a 0700 directory, the data directory 0700."""
    environ = {"STACK_RUN_DIR": str(tmp_path), "TLS": str(tls).lower()}
    settings = ensure_credentials(Settings.from_sources(environ=environ))
    node = Kafka(settings)
    if problem := node.missing_install():
        cannot_run(problem)
    password = settings.credential("kafka", "admin").reveal()
    seen: list[dict[str, Any]] = []
    real_popen = subprocess.Popen

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
        process = real_popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # empty for a moment around exec (as ManagedProcess.start knows): read once it is set
        cmdline = wait_until(
            lambda: Path(f"/proc/{process.pid}/cmdline").read_bytes().decode(),
            10,
            "the storage tool's command line",
            interval_s=0.01,
        )
        argument_file = Path(command[-1].removeprefix("@"))
        seen.append(
            {
                "cmdline": cmdline,
                "command": command,
                "file_mode": stat.S_IMODE(argument_file.stat().st_mode),
                "file_text": argument_file.read_text(),
            }
        )
        out, err = process.communicate(timeout=kwargs.get("timeout"))
        return subprocess.CompletedProcess(command, process.returncode, out, err)

    monkeypatch.setattr(kafka_server.subprocess, "run", run)
    node.prepare()
    assert len(seen) == 1
    (format_run,) = seen
    assert password not in format_run["cmdline"] and "--add-scram" not in format_run["cmdline"]
    assert format_run["cmdline"].split("\0")[-2] == format_run["command"][-1]  # the @file
    assert format_run["command"][-1].startswith(f"@{node.conf_dir}/")
    assert format_run["file_mode"] == 0o600
    assert f"password={password}]" in format_run["file_text"]
    assert "kafka.tools.StorageTool" in format_run["file_text"]
    assert not list(node.conf_dir.glob("*.args")), "argument file left behind"
    assert (node.data_dir / "meta.properties").exists()  # the tool read its arguments
    assert stat.S_IMODE((node.conf_dir / "server.properties").stat().st_mode) == 0o600
    for directory in (node.conf_dir, node.data_dir):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory
    properties = (node.conf_dir / "server.properties").read_text()
    protocol = "SASL_SSL" if tls else "SASL_PLAINTEXT"
    assert f"listener.security.protocol.map=CONTROLLER:{protocol},CLIENT:{protocol}" in properties
    assert ("ssl.keystore.type=PEM" in properties) is tls
    if tls:
        paths = certs.files(settings)
        assert f"ssl.keystore.location={paths.server_keystore}\n" in properties
        assert f"ssl.truststore.location={paths.ca}\n" in properties
        assert "ssl.endpoint.identification.algorithm=https\n" in properties
