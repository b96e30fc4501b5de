"""The stack launcher's own behaviour: config precedence, clear errors for taken ports and
missing installs, ownership of processes, the credentials in effect after a first ``up()``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqtt_bridge.config import BridgeSettings
from stacktools.stack import Stack, StackError, ensure_credentials
from stacktools.stack import process as process_module
from stacktools.stack.process import KeptService, ManagedProcess, group_alive
from stacktools.stack.servers.mosquitto import MOSQUITTO_MIN_VERSION, parse_mosquitto_version
from stacktools.stack.settings import Settings
from streamkit.config import SYSTEMS
from streamkit.deadline import wait_until
from streamkit.errors import ConfigError
from streamkit.fields import identity_fields
from tests.support.ports import free_ports


def test_precedence_cli_over_env_over_credentials_file(tmp_path: Path) -> None:
    (tmp_path / "credentials.env").write_text("MQTT_PASSWORD=from-file\nINFLUX_PASSWORD=file2\n")
    env = {"STACK_RUN_DIR": str(tmp_path), "MQTT_PASSWORD": "from-env", "KAFKA_PORT": "19092"}
    settings = Settings.from_sources(environ=env)
    assert settings.mqtt_password.reveal() == "from-env"
    assert settings.influx_password.reveal() == "file2"
    assert settings.bootstrap_servers == "127.0.0.1:19092"
    assert (
        Settings.from_sources(environ=env, cli={"kafka_port": 29092}).bootstrap_servers
        == "127.0.0.1:29092"
    )
    assert "from-env" not in str(settings.redacted())


def test_bad_env_value_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="KAFKA_PORT: 'x' is not a valid int"):
        Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path), "KAFKA_PORT": "x"})


def test_generated_credentials_are_private_and_stable(tmp_path: Path) -> None:
    settings = ensure_credentials(Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}))
    assert len(settings.mqtt_password.reveal()) >= 20
    assert settings.mqtt_password != settings.influx_password
    assert (tmp_path / "credentials.env").stat().st_mode & 0o077 == 0
    again = ensure_credentials(Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}))
    assert again.mqtt_password == settings.mqtt_password


def test_taken_port_gives_a_clear_message_quickly(tmp_path: Path, free_port: int) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", free_port))
        squatter.listen()
        settings = Settings.from_sources(
            environ={"STACK_RUN_DIR": str(tmp_path), "PROMETHEUS_PORT": str(free_port)}
        )
        started = time.monotonic()
        with pytest.raises(StackError, match=f"port {free_port} is already in use"):
            Stack(settings, ["prometheus"], allow_external=False).up()
        assert time.monotonic() - started < 10


def test_cli_reports_taken_port_with_exit_code_2(tmp_path: Path, free_port: int) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", free_port))
        squatter.listen()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "stacktools.stack",
                "up",
                "mosquitto",
                "--run-dir",
                str(tmp_path),
                "--mqtt-port",
                str(free_port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2
    assert f"port {free_port} is already in use" in result.stderr


def test_unknown_component_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StackError, match="unknown component"):
        Stack(Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}), ["zookeeper"])


def test_a_mosquitto_that_ignores_the_in_flight_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Debian 12's own Mosquitto (2.0.11) pushes a returning client's whole backlog in flight:
    the launcher names the version and the fix before it starts anything."""
    programs = tmp_path / "bin"
    programs.mkdir()
    fake = programs / "mosquitto"  # prints what the real one does for -h, and its exit code
    fake.write_text("#!/bin/sh\necho 'mosquitto version 2.0.11'\necho\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ['PATH']}")
    stack = Stack(Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}), ["mosquitto"])
    with pytest.raises(
        StackError, match=r"mosquitto 2\.0\.11 ignores MQTT_MAX_INFLIGHT.*setup\.sh"
    ):
        stack.up()
    assert not (tmp_path / "logs" / "mosquitto.log").exists(), "it started the broker anyway"
    assert (
        parse_mosquitto_version("mosquitto version 2.0.21\n") == (2, 0, 21) >= MOSQUITTO_MIN_VERSION
    )


def test_only_processes_naming_our_run_dir_count_as_ours(tmp_path: Path) -> None:
    ours = ManagedProcess("sleeper", tmp_path)
    pid = ours.start([sys.executable, "-c", f"import time; time.sleep(60)  # {tmp_path}"])
    assert ours.pid() == pid
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ours.pid_file.write_text(str(stranger.pid))  # a reused pid: not ours, must not be stopped
        assert ours.pid() is None and not ours.pid_file.exists()
        assert ours.stop() is False and stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
    ours.pid_file.write_text(str(pid))
    assert ours.stop(timeout_s=10) is True
    assert ours.pid() is None


def test_settings_pass_to_a_child_process_unchanged_but_for_the_identity(tmp_path: Path) -> None:
    """A child gets the caller's run dir, ports and topics, but logs in as its own user with
    its own password: the launcher's admin password never reaches a service."""
    (tmp_path / "credentials.env").write_text(
        "KAFKA_ADMIN_PASSWORD=admin-pw\nKAFKA_BRIDGE_PASSWORD=bridge-pw\n"
    )
    settings = Settings.from_sources(
        environ={"STACK_RUN_DIR": str(tmp_path), "MQTT_PASSWORD": "p w=1"},
        cli={"kafka_port": 19092, "influx_database": "db"},
    )
    assert (
        settings.kafka_username,
        settings.kafka_password.reveal(),
        settings.mqtt_password.reveal(),
    ) == (
        "admin",
        "admin-pw",
        "p w=1",
    )
    environment = settings.as_environment()
    assert not {"KAFKA_PASSWORD", "MQTT_PASSWORD", "KAFKA_USERNAME"} & set(environment)
    child = BridgeSettings.from_sources(environ=environment)
    assert (
        child.kafka_username,
        child.kafka_password.reveal(),
        child.mqtt_password.reveal(),
    ) == (
        "bridge",
        "bridge-pw",
        "",
    )
    identities = {name for system in SYSTEMS for name in identity_fields(system)}
    shared = (
        vars(child).keys() & vars(settings).keys()
    ) - identities  # the bridge has no InfluxDB settings
    assert {
        "run_dir",
        "kafka_port",
        "raw_topic",
        "mqtt_port",
    } <= shared and "influx_database" not in shared
    assert {k: vars(child)[k] for k in shared} == {k: vars(settings)[k] for k in shared}


@pytest.mark.stack
def test_first_up_returns_the_credentials_the_servers_were_given(tmp_path: Path) -> None:
    """A first run has no credentials until up() generates them: the settings from before it
    are refused by InfluxDB, the ones it returns are accepted (the demo's first-run failure)."""
    from stacktools.stack.influx import InfluxClient

    environ = {"STACK_RUN_DIR": str(tmp_path / "run"), "INFLUX_PORT": str(free_ports(1)[0])}
    before = Settings.from_sources(environ=environ)
    assert not before.influx_password and not before.credentials_path.exists()
    stack = Stack(before, ["influxdb"], allow_external=False)
    try:
        after = stack.up()
        assert after.influx_password and after.credentials_path.exists()
        assert InfluxClient(after).query("SHOW DATABASES")[0] == 200
        assert InfluxClient(before).query("SHOW DATABASES")[0] in (401, 403)
        assert Settings.from_sources(environ=environ) == after  # what every later process reads
    finally:
        stack.down()


def test_down_stops_the_services_the_demo_left_running_first_and_status_shows_them(
    tmp_path: Path,
) -> None:
    """A kept service is a process group (a Spark driver with its JVM and Python workers): the
    whole group goes, on SIGTERM, and a pid reused by another process is never signalled."""
    settings = Settings.from_sources(cli={"run_dir": tmp_path})
    script = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
    service = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        KeptService.record(tmp_path, "mqtt_bridge", service.pid, tmp_path / "bridge.log")
        KeptService.record(tmp_path, "db_connector", stranger.pid, tmp_path / "connector.log")
        reused = KeptService("db_connector", tmp_path).pid_file
        pid, _start, log = reused.read_text().split()
        reused.write_text(f"{pid} 1 {log}\n")  # another process now has that pid
        children = Path(f"/proc/{service.pid}/task/{service.pid}/children")
        wait_until(lambda: children.read_text().strip(), 30, "the service's child sleep started")
        rows = {row.name: row for row in Stack(settings).status()}
        assert rows["mqtt_bridge"].pid == service.pid and rows["mqtt_bridge"].state == "running"
        assert (
            rows["mqtt_bridge"].log == str(tmp_path / "bridge.log") and "db_connector" not in rows
        )
        assert Stack(settings, ["kafka"]).kept_services() == [], (
            "down/status of named servers leave services"
        )
        started = time.monotonic()
        assert Stack(settings).down() == ["mqtt_bridge"]
        assert time.monotonic() - started < Stack.STOP_TIMEOUT_S
        assert service.wait(5) is not None and not group_alive(service.pid), (
            "the service's child outlived it"
        )
        assert stranger.poll() is None, "a process that reused a kept pid was signalled"
        assert not Stack(settings).status() or all(
            row.name != "mqtt_bridge" for row in Stack(settings).status()
        )
    finally:
        for process in (service, stranger):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_process_inside_exec_stays_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """spark-class execs java a few seconds after the launcher started it; during the execve the
    command line reads empty for a moment. That is no reason to disown the process (the launcher
    said "exited while starting" and lost its pid file while the worker ran on)."""
    # a command line naming the run dir ($0 of the shell), as a server of the stack has
    sleeper = subprocess.Popen(["sh", "-c", "sleep 30", str(tmp_path)])
    try:
        managed = ManagedProcess("sleeper", tmp_path)
        managed.pid_file.parent.mkdir(parents=True)
        managed.pid_file.write_text(str(sleeper.pid))
        real = process_module._cmdline
        wait_until(lambda: str(tmp_path) in real(sleeper.pid), 5, "sleep exec'd", interval_s=0.01)
        empty_reads = [2]  # the moment inside execve, as the launcher may meet it

        def cmdline(pid: int) -> str:
            if empty_reads[0]:
                empty_reads[0] -= 1
                return ""
            return real(pid)

        monkeypatch.setattr(process_module, "_cmdline", cmdline)
        assert managed.pid() == sleeper.pid
        assert managed.pid_file.exists() and empty_reads == [0]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert managed.pid() is None and not managed.pid_file.exists(), "a dead process stayed ours"
