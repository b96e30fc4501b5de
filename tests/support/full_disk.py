"""Full disks made by a test: a small tmpfs under a private server's data directory, a file
that takes every free byte of it, and the disk reporter watching it for the stack's own
Prometheus, whose disk alert the test then waits for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stacktools.stack import Stack
from stacktools.stack.disk_space import ROUND_S
from stacktools.stack.process import free_port
from stacktools.stack.servers.base import Component
from stacktools.stack.servers.prometheus import INTERVAL_S
from stacktools.stack.settings import Settings
from tests.support.require import cannot_run
from tests.support.waits import settle

#: The alert a full disk must raise (prometheus/alerts.yml).
ALERT = "DataDiskNearlyFull"


@contextmanager
def small_filesystem(directory: Path, size: str) -> Iterator[Path]:
    """``directory``, made, on a tmpfs of ``size`` for the time of the block."""
    if os.geteuid() != 0:
        cannot_run("mounting a tmpfs needs root")
    directory.mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", directory], check=True
    )
    try:
        yield directory
    finally:
        subprocess.run(["umount", "--lazy", directory], check=False)


@contextmanager
def small_run_dir(stack_settings: Settings, run: Path, server: str, size: str) -> Iterator[Path]:
    """``run`` with ``data/<server>`` on a tmpfs of ``size``, and the stack's certificates and
    passwords (a private server started there takes the stack's clients as they are); the data
    directory."""
    with small_filesystem(run / "data" / server, size) as data:
        copy_stack_secrets(stack_settings, run)
        yield data


def copy_stack_secrets(stack_settings: Settings, run: Path) -> None:
    """The stack's certificates and passwords into ``run``: a private server started there takes
    the stack's clients as they are."""
    shutil.copytree(stack_settings.run_dir / "tls", run / "tls")
    shutil.copy2(stack_settings.credentials_path, run / "credentials.env")


def settings_in(stack_settings: Settings, run: Path, overrides: dict[str, int]) -> Settings:
    """The stack's settings (this test worker's stack's: its ports, its run directory's
    passwords) with ``run`` as the run directory and a private server's ports and other
    numbers (``overrides``, by variable)."""
    environ = {
        **os.environ,
        **stack_settings.as_environment(),
        "STACK_RUN_DIR": str(run),
        **{name: str(value) for name, value in overrides.items()},
    }
    return Settings.from_sources(environ=environ)


@contextmanager
def private_server(
    stack_settings: Settings, run: Path, server: str, overrides: dict[str, int]
) -> Iterator[Settings]:
    """``server`` (a launcher component) of its own, started in ``run`` with
    :func:`settings_in`'s settings, and stopped after the block; its settings."""
    stack = Stack(settings_in(stack_settings, run, overrides), [server], allow_external=False)
    try:
        yield stack.up()
    finally:
        stack.down()


def fill(directory: Path) -> Path:
    """A file taking every free byte of ``directory``'s filesystem (written unbuffered, in
    smaller blocks as it fills, so that nothing is left to flush)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1 << 9):
            block = b"\0" * size
            try:
                while os.write(fd, block):
                    pass
            except OSError:
                continue
    finally:
        os.close(fd)
    return filler


def alert_raised(settings: Settings, name: str) -> bool:
    """Whether the stack's Prometheus holds the disk alert (pending or firing) for ``name``."""
    url = f"http://127.0.0.1:{settings.prometheus_port}/api/v1/alerts"
    with urllib.request.urlopen(url, timeout=10) as response:
        alerts = json.load(response)["data"]["alerts"]
    return any(
        a["labels"].get("alertname") == ALERT and a["labels"].get("dir") == name for a in alerts
    )


@contextmanager
def watched(stack_settings: Settings, name: str, directory: Path) -> Iterator[None]:
    """The disk reporter for ``directory`` (labelled ``dir=name``), scraped by the stack's
    Prometheus through a file target while the block runs."""
    port = free_port()
    reporter = subprocess.Popen(
        [sys.executable, "-m", "stacktools.stack.disk_space", "--metrics-port", str(port)]
        + ["--disk-watch", f"{name}={directory}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    target = stack_settings.run_dir / "prometheus" / "targets" / f"pipeline-{name}-disk.json"
    labels = {"service": "disk_space", "job": "disk_space"}
    target.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": labels}]))
    try:
        yield
    finally:
        target.unlink(missing_ok=True)
        reporter.terminate()
        reporter.wait(30)


@contextmanager
def resuming(settings: Settings, server: str, log: Path) -> Iterator[None]:
    """A disk reporter that resumes ``server`` of ``settings``' run directory, as the launcher
    runs one for its servers (``--disk-resume``), with the launcher's settings in its
    environment; its own log into ``log``."""
    data = settings.run_dir / "data" / server
    with log.open("ab") as output:
        reporter = subprocess.Popen(
            [sys.executable, "-m", "stacktools.stack.disk_space", "--metrics-port"]
            + [str(free_port()), "--disk-watch", f"{server}={data}", "--disk-resume", server],
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, **settings.as_environment()},
        )
    try:
        yield
    finally:
        reporter.terminate()
        reporter.wait(30)


def resumed_by_the_reporter(log: Path) -> bool:
    """Whether the reporter logging to ``log`` ran the launcher for a server, and the launcher
    succeeded."""
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return any(
        line.get("msg") == "the launcher finished" and line.get("exit_code") == 0 for line in lines
    )


def wait_resumed(log: Path, server: Component) -> None:
    """The reporter's launch of ``server`` done and seen: the launcher stops it and starts it,
    each within its own bound, and the reporter notices at its next round."""
    settle(
        lambda: resumed_by_the_reporter(log),
        Stack.STOP_TIMEOUT_S + server.start_timeout_s + 2 * ROUND_S,
        f"the disk reporter's launch of {server.name}",
        interval_s=1,
    )


def wait_for_the_alert(stack_settings: Settings, name: str) -> None:
    """Prometheus notices the file target, scrapes the reporter (its first answer within a
    round) and evaluates the rule: an interval each, with room for a loaded machine."""
    settle(
        lambda: alert_raised(stack_settings, name),
        4 * INTERVAL_S + ROUND_S + 30,
        f"{ALERT} for {name}",
        interval_s=1,
    )
