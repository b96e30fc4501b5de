"""The launcher's Spark standalone cluster: a master and workers as local processes, each
healthy only once registered; jobs run on it with the generated shared secret, and only with it."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacktools.stack import Stack
from stacktools.stack.process import ManagedProcess, port_open
from stacktools.stack.servers.spark import SparkMaster
from stacktools.stack.settings import Settings
from streamkit.sizes import parse_size
from tests.support import procfs
from tests.support.ports import free_ports
from tests.support.privacy import exposed

pytestmark = [pytest.mark.stack]


def consecutive_free_ports(count: int) -> int:
    """A first port with ``count`` free ports from it on (a worker listens on the master's + N)."""
    for first in free_ports(20):
        if first + count < 65536 and not any(port_open(p) for p in range(first, first + count)):
            return first
    raise RuntimeError("no run of free ports")


def probe(master: str, secret: str, timeout_s: float) -> dict | None:
    """The probe job's JSON, or None if it did not finish in time or failed."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.drivers.cluster_probe", master],
            env={**os.environ, "SPARK_CLUSTER_PASSWORD": secret},
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if done.returncode == 0 and lines else None


def test_cluster_up_runs_jobs_on_its_workers_with_the_secret_and_down_stops_it(
    tmp_path: Path,
) -> None:
    first = consecutive_free_ports(6)  # master and two workers, then their UIs
    settings = dataclasses.replace(
        Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}),
        spark_master_port=first,
        spark_master_ui_port=first + 3,
        spark_workers=2,
        spark_worker_cores=1,
        spark_worker_memory=parse_size("1g"),
    )
    stack = Stack(settings, ["spark"])
    settings = stack.up()
    try:
        names = ["spark-master", "spark-worker-1", "spark-worker-2"]
        assert [s.name for s in stack.status()] == names and {s.state for s in stack.status()} == {
            "running"
        }
        workers = SparkMaster(settings).master_status()["workers"]
        assert sorted((w["port"], w["cores"], w["state"]) for w in workers) == [
            (settings.spark_master_port + i, 1, "ALIVE") for i in (1, 2)
        ]
        master = f"spark://127.0.0.1:{settings.spark_master_port}"
        secret = settings.credential("spark", "cluster").reveal()
        assert len(secret) >= 20, "the launcher generates the cluster's secret"
        result = probe(master, secret, 240)
        assert result is not None, "the probe job did not run on the cluster"
        assert result["executors"] == 2 and result["rows"] == 1000 and result["on_executors"], (
            result
        )
        assert probe(master, "not-" + secret, 45) is None, (
            "a job with a wrong secret ran on the cluster"
        )
    finally:
        stopped = stack.down()
    assert sorted(stopped) == sorted(names)
    assert all(ManagedProcess(name, settings.run_dir).pid() is None for name in names)
    assert not any(
        port_open(p) for p in (settings.spark_master_port, settings.spark_master_ui_port)
    )


@contextlib.contextmanager
def held_probe(master: str, secret: str, timeout_s: float = 240) -> Iterator[tuple[int, dict]]:
    """The probe job run once and held (driver, executors, Python workers alive): its pid and
    its JSON. Ended by closing its standard input."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.drivers.cluster_probe", master, "--hold"],
        env={**os.environ, "SPARK_CLUSTER_PASSWORD": secret},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    watchdog = threading.Timer(timeout_s, process.kill)  # a hang ends as an empty stdout
    watchdog.start()
    try:
        assert process.stdout is not None and process.stdin is not None
        lines = (line for line in process.stdout if line.startswith("{"))
        result = json.loads(next(lines, "null"))
        watchdog.cancel()
        assert result is not None, f"the probe on {master} printed nothing"
        yield process.pid, result
        process.stdin.close()
        process.wait(60)
    finally:
        watchdog.cancel()
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def not_on_loopback(pids: set[int]) -> dict[str, list[str]]:
    return {
        procfs.describe(pid): [str(s) for s in sockets if not s.loopback_v4]
        for pid, sockets in procfs.listeners(pids).items()
        if any(not s.loopback_v4 for s in sockets)
    }


def test_every_listener_of_the_cluster_and_of_its_jobs_is_on_loopback(tmp_path: Path) -> None:
    """Master, worker (their RPC and UI ports), the executors it starts, a job's driver (its
    RPC, block manager and UI) and the Python workers: each listening socket on 127.0.0.1.
    The cluster's files are private, and its secret is on no command line."""
    first = consecutive_free_ports(4)  # master and one worker, then their UIs
    settings = dataclasses.replace(
        Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}),
        spark_master_port=first,
        spark_master_ui_port=first + 2,
        spark_workers=1,
        spark_worker_cores=1,
        spark_worker_memory=parse_size("1g"),
    )
    stack = Stack(settings, ["spark"])
    settings = stack.up()
    try:
        servers = [s.pid for s in stack.status() if s.pid is not None]
        assert len(servers) == 2, stack.status()
        master = f"spark://127.0.0.1:{settings.spark_master_port}"
        secret = settings.credential("spark", "cluster").reveal()
        with held_probe(master, secret) as (driver, result):
            assert result["executors"] == 1 and result["on_executors"], result
            tree = procfs.descendants(driver).union(*map(procfs.descendants, servers))
            listening = {s.port for sockets in procfs.listeners(tree).values() for s in sockets}
            cluster_ports = {first, first + 1, first + 2, first + 3}
            ui_port = int(result["ui"].rsplit(":", 1)[1])
            assert cluster_ports | {ui_port} <= listening, listening
            assert result["ui"].startswith("http://127.0.0.1:"), result
            executors = procfs.descendants(servers[1]) - {servers[1]}
            assert any(b"CoarseGrainedExecutorBackend" in procfs.cmdline(p) for p in executors)
            assert not_on_loopback(tree) == {}
            assert [p for p in tree if secret.encode() in procfs.cmdline(p)] == []
    finally:
        stack.down()
    assert exposed(settings.run_dir) == []


def test_a_local_job_s_driver_listens_on_loopback_only() -> None:
    """``local[*]``: the driver's RPC, block manager and UI (port 4040 and up) on 127.0.0.1
    (Spark's own default is the host's address, and every interface for the UI)."""
    with held_probe("local[1]", "") as (driver, result):
        sockets = procfs.listeners(procfs.descendants(driver))
        ports = {s.port for found in sockets.values() for s in found}
        assert result["ui"].startswith("http://127.0.0.1:"), result
        assert int(result["ui"].rsplit(":", 1)[1]) in ports, sockets
        assert not_on_loopback(procfs.descendants(driver)) == {}
