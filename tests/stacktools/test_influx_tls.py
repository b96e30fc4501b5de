"""InfluxDB on the real influxd: its first start leaves no window in which a stranger becomes
admin, and over HTTPS it refuses a plaintext client, a client with another CA and a wrong host
name, while a client with the stack's CA writes and reads (the launcher's InfluxQL client and
the connector's influxdb-client alike)."""

from __future__ import annotations

import dataclasses
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from db_connector.config import ConnectorSettings
from db_connector.errors import WriteUnavailable
from db_connector.influx_writer import InfluxWriter
from stacktools.stack import Stack, certs
from stacktools.stack.influx import InfluxClient
from stacktools.stack.process import ManagedProcess
from stacktools.stack.settings import Settings
from streamkit.wire.retention import source
from tests.support.influx_stranger import Stranger, assert_stranger_lost
from tests.support.ports import free_ports
from tests.support.relay import relay
from tests.support.server_checks import check_influx_write_read

pytestmark = pytest.mark.stack


def pid_of(pid_file: Path) -> int:
    """influxd's pid (a stranger finds it in ``ps``; reading the launcher's pid file is the quick
    way here, and read-only: ManagedProcess.pid() would remove a file it doubts)."""
    try:
        return int(pid_file.read_text())
    except (OSError, ValueError):
        return 0


def first_start_raced(run_dir: Path, tls: bool) -> tuple[Stack, Settings, Stranger, float]:
    """A fresh InfluxDB started by the launcher while a stranger races it: the stack, its
    settings, the stranger (stopped) and the seconds ``up()`` took."""
    environ = {
        "STACK_RUN_DIR": str(run_dir),
        "INFLUX_PORT": str(free_ports(1)[0]),
        "TLS": str(tls).lower(),
    }
    settings = Settings.from_sources(environ=environ)
    stack = Stack(settings, ["influxdb"], allow_external=False)
    pid_file = ManagedProcess("influxdb", settings.run_dir).pid_file
    stranger = Stranger(settings, lambda: pid_of(pid_file))
    stranger.start()
    assert stranger.attempts.acquire(timeout=10)  # racing before the process is spawned
    started = time.monotonic()
    try:
        settings = stack.up()
    except BaseException:
        stack.down()
        raise
    finally:
        seconds = time.monotonic() - started
        stranger.stop.set()
        stranger.join(10)
    return stack, settings, stranger, seconds


@pytest.fixture(scope="module")
def tls_influx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Stranger]]:
    """A fresh InfluxDB with TLS on, its first start raced by a stranger."""
    run_dir = tmp_path_factory.mktemp("influx-tls") / "run"
    stack, settings, stranger, seconds = first_start_raced(run_dir, tls=True)
    print(f"first start with TLS, raced: {seconds:.1f} s")
    try:
        yield settings, stranger
    finally:
        stack.down()


def test_a_stranger_racing_the_first_start_never_becomes_admin_tls(
    tls_influx: tuple[Settings, Stranger],
) -> None:
    assert_stranger_lost(*tls_influx)


def test_a_stranger_racing_the_first_start_never_becomes_admin_plain(tmp_path: Path) -> None:
    """And a data directory from before the bootstrap run (an admin, no record of it) starts
    with its admin: the bootstrap run finds one and creates none."""
    stack, settings, stranger, seconds = first_start_raced(tmp_path / "run", tls=False)
    print(f"first start without TLS, raced: {seconds:.1f} s")
    try:
        assert_stranger_lost(settings, stranger)
        stack.down()
        marker = settings.run_dir / "data" / "influxdb" / "admin-created"
        marker.unlink()
        stack.up()
        assert marker.exists()
        status, body = InfluxClient(settings).query("SHOW USERS")
        assert status == 200, body
        assert [settings.influx_username, True] in body["results"][0]["series"][0]["values"]
    finally:
        stack.down()


def test_the_run_files_are_private_and_the_bootstrap_left_nothing(
    tls_influx: tuple[Settings, Stranger],
) -> None:
    settings, _ = tls_influx
    for directory in (settings.run_dir / "influxdb", settings.run_dir / "data" / "influxdb"):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    assert not (settings.run_dir / "influxdb" / "bootstrap").exists()
    config = (settings.run_dir / "influxdb" / "influxdb.conf").read_text()
    assert "https-enabled = true" in config and "unix-socket-enabled" not in config
    assert settings.influx_password.reveal() not in config


def connector_settings(settings: Settings, **changes: Any) -> ConnectorSettings:
    environ = {
        "STACK_RUN_DIR": str(settings.run_dir),
        "INFLUX_PORT": str(settings.influx_port),
        "TLS": "true",
    }
    return dataclasses.replace(ConnectorSettings.from_sources(environ=environ), **changes)


def test_plain_http_to_the_https_port_is_refused(tls_influx: tuple[Settings, Stranger]) -> None:
    settings, _ = tls_influx
    plain = dataclasses.replace(settings, tls=False)
    assert plain.influx_base_url.startswith("http://")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{plain.influx_base_url}/ping", timeout=10)
    assert refused.value.code == 400
    assert refused.value.read() == b"Client sent an HTTP request to an HTTPS server.\n"
    # the connector: not the points' fault (no dead letters), InfluxDB is unavailable to it
    writer = InfluxWriter(connector_settings(settings, tls=False))
    with pytest.raises(WriteUnavailable) as unavailable:
        writer.write(["tls_check value=1"])
    writer.close()
    assert unavailable.value.cause == "tls" and "plain HTTP" in str(unavailable.value)


def test_a_reset_on_a_plain_url_to_the_https_port_is_still_named_tls(
    tls_influx: tuple[Settings, Stranger], monkeypatch: pytest.MonkeyPatch
) -> None:
    """InfluxDB closes on plain HTTP while a write's body may still be sent: the client then
    sees a reset, not the 400. The writer still names the cause: a plain URL to HTTPS."""
    settings, _ = tls_influx
    writer = InfluxWriter(connector_settings(settings, tls=False))

    def reset(**_: Any) -> None:
        raise urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104))

    monkeypatch.setattr(writer.api, "write", reset)
    with pytest.raises(WriteUnavailable) as unavailable:
        writer.write(["tls_check value=1"])
    writer.close()
    assert unavailable.value.cause == "tls" and "plain HTTP" in str(unavailable.value)
    # the same reset on the HTTPS URL is a connection problem, as before
    writer = InfluxWriter(connector_settings(settings))
    monkeypatch.setattr(writer.api, "write", reset)
    with pytest.raises(WriteUnavailable) as unavailable:
        writer.write(["tls_check value=1"])
    writer.close()
    assert unavailable.value.cause == "connection"


def test_a_client_with_another_ca_is_refused(
    tls_influx: tuple[Settings, Stranger], tmp_path: Path
) -> None:
    settings, _ = tls_influx
    other = certs.ensure(Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}))
    with pytest.raises(urllib.error.URLError) as refused:
        InfluxClient(dataclasses.replace(settings, tls_ca_file=str(other.ca))).query("SHOW USERS")
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
    assert refused.value.reason.verify_message == "self-signed certificate in certificate chain"
    writer = InfluxWriter(connector_settings(settings, tls_ca_file=str(other.ca)))
    with pytest.raises(WriteUnavailable) as unavailable:
        writer.write(["tls_check value=1"])
    writer.close()
    assert unavailable.value.cause == "tls"
    assert "CERTIFICATE_VERIFY_FAILED" in str(unavailable.value)


def test_a_wrong_host_name_is_refused(tls_influx: tuple[Settings, Stranger]) -> None:
    settings, _ = tls_influx
    with relay(settings.influx_port) as port:
        url = f"https://127.0.0.2:{port}"
        with pytest.raises(urllib.error.URLError) as refused:
            InfluxClient(dataclasses.replace(settings, influx_url=url)).query("SHOW USERS")
        assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
        assert refused.value.reason.verify_message == (
            "IP address mismatch, certificate is not valid for '127.0.0.2'."
        )
        writer = InfluxWriter(connector_settings(settings, influx_url=url))
        with pytest.raises(WriteUnavailable) as unavailable:
            writer.write(["tls_check value=1"])
        writer.close()
    assert unavailable.value.cause == "tls" and "IP address mismatch" in str(unavailable.value)


def test_the_stacks_ca_works(tls_influx: tuple[Settings, Stranger]) -> None:
    settings, _ = tls_influx
    assert settings.influx_base_url.startswith("https://")
    check_influx_write_read(settings)  # influxdb-client writes, InfluxQL reads
    measurement = f"tls_{uuid.uuid4().hex[:8]}"
    connector = connector_settings(settings)
    writer = InfluxWriter(connector)
    assert writer.write([f"{measurement},thing=R1 power=7.5 1700000000000000000"]) == []
    writer.close()
    rows = InfluxClient(settings).rows(
        settings.influx_database, f"SELECT * FROM {source(measurement)}"
    )
    assert rows == [{"time": 1700000000000000000, "power": 7.5, "thing": "R1"}]
