"""Closed doors and private data on the real servers: Prometheus cannot be stopped or reloaded
over HTTP, and everything a first ``stack up`` writes is the stack user's alone."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from stacktools.stack import Stack
from stacktools.stack.process import ManagedProcess
from stacktools.stack.servers import DEFAULT_GROUPS
from stacktools.stack.settings import Settings
from tests.support.ports import free_ports
from tests.support.privacy import exposed

pytestmark = pytest.mark.stack


def post(url: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_prometheus_refuses_quit_and_reload_and_stays_up(stack_settings: Settings) -> None:
    """Without --web.enable-lifecycle Prometheus answers 403 "Lifecycle API is not enabled."
    to both; anyone on the machine could otherwise stop it."""
    base = f"http://127.0.0.1:{stack_settings.prometheus_port}"
    pid = ManagedProcess("prometheus", stack_settings.run_dir).pid()
    assert pid is not None, "the session's Prometheus is not the launcher's"
    for action in ("quit", "reload"):
        status, body = post(f"{base}/-/{action}")
        assert (status, body.strip()) == (403, b"Lifecycle API is not enabled."), action
    with urllib.request.urlopen(f"{base}/-/healthy", timeout=10) as response:
        assert response.status == 200
    assert ManagedProcess("prometheus", stack_settings.run_dir).pid() == pid


def test_a_first_up_and_down_leave_nothing_readable_by_others(tmp_path: Path) -> None:
    """A new run directory after ``up`` (configurations, passwords, data, logs, pid files of
    every server) and after ``down`` (what the servers write on their way out): no file or
    directory that the stack user's group or other users could read."""
    kafka, controller, mqtt, influx, prometheus, alertmanager = free_ports(6)
    environ = {
        **os.environ,
        "STACK_RUN_DIR": str(tmp_path / "run"),
        "KAFKA_PORT": str(kafka),
        "KAFKA_CONTROLLER_PORT": str(controller),
        "MQTT_PORT": str(mqtt),
        "INFLUX_PORT": str(influx),
        "PROMETHEUS_PORT": str(prometheus),
        "ALERTMANAGER_PORT": str(alertmanager),
    }
    stack = Stack(Settings.from_sources(environ), list(DEFAULT_GROUPS), allow_external=False)
    try:
        settings = stack.up()
        assert exposed(settings.run_dir) == []
    finally:
        stack.down()
    assert exposed(settings.run_dir) == []
