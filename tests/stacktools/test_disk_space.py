"""The disk-space reporter the disk alert reads: its values are the filesystem's, its
directories list is checked before it starts, and it serves them and stops on SIGTERM."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from stacktools.harness.scrape import scrape_metrics
from stacktools.stack.disk_space import DiskSpace, watched
from stacktools.stack.process import free_port
from streamkit.deadline import wait_until
from streamkit.paths import REPO_ROOT


def test_the_values_are_the_filesystems_and_a_missing_directory_has_none(tmp_path: Path) -> None:
    free, size = DiskSpace({"here": tmp_path, "gone": tmp_path / "missing"}).collect()
    usage = shutil.disk_usage(tmp_path)
    assert [(s.labels, s.value) for s in size.samples] == [({"dir": "here"}, usage.total)]
    [sample] = free.samples
    assert sample.labels == {"dir": "here"}
    assert abs(sample.value - usage.free) < 64 * 1024 * 1024  # other writers meanwhile


def test_the_directories_are_name_equals_path() -> None:
    assert watched("kafka=/a, influxdb=/b") == {"kafka": Path("/a"), "influxdb": Path("/b")}
    for bad in ("", "kafka", "=/a", "kafka="):
        with pytest.raises(ValueError, match="DISK_WATCH"):
            watched(bad)


def test_it_serves_the_gauges_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "stacktools.stack.disk_space", "--metrics-port", str(port)]
        + ["--disk-watch", f"data={tmp_path}"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        metrics = wait_until(lambda: scrape_metrics(port), 30, "its /metrics", interval_s=0.2)
        assert metrics['data_dir_filesystem_bytes{dir="data"}'] == shutil.disk_usage(tmp_path).total
        assert 'data_dir_free_bytes{dir="data"}' in metrics
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        process.kill()
        process.wait()
