"""The launcher's Spark standalone cluster: a master and workers as local processes, each
healthy only once registered; jobs run on it with the generated shared secret, and only with it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from stacktools.stack import Stack
from stacktools.stack.components import SparkMaster
from stacktools.stack.process import ManagedProcess, port_open
from streamkit.config import Settings
from streamkit.sizes import parse_size
from tests.support.ports import free_ports

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
            [sys.executable, "-m", "tests.support.cluster_probe", master, secret],
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
