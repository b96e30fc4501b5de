"""When the disk reporter starts a server again after a full disk (stacktools.stack.resume): a
Kafka node that logged the full disk and stopped, InfluxDB whose disk it saw full while the same
process ran; never a server the launcher stopped, never twice within its retry interval, and
only once the disk has room. The launcher's commands are stood in for by `true`; the real
launcher runs in the full-disk tests (tests/stacktools/test_full_kafka_disk.py,
tests/db_connector/test_full_disk.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import namedtuple
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacktools.stack import resume
from stacktools.stack.disk_space import DiskSpaceSettings, check
from stacktools.stack.process import LOG_MARK, STARTING, STOPPING
from stacktools.stack.resume import RETRY_S, ROOM_SHARE, Resumer, since_last_start
from streamkit.paths import REPO_ROOT

Usage = namedtuple("Usage", "total used free")


class Disk:
    """shutil.disk_usage as the resume module sees it: one filesystem, its free bytes set."""

    def __init__(self) -> None:
        self.free = 50 << 20

    def usage(self, _path: object) -> Usage:
        total = 100 << 20
        return Usage(total, total - self.free, self.free)


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Disk:
    fake = Disk()
    monkeypatch.setattr(resume.shutil, "disk_usage", fake.usage)
    monkeypatch.setattr(resume, "launcher_steps", lambda _server: [["true"]])
    return fake


def logged(run_dir: Path, server: str, *lines: str) -> None:
    path = run_dir / "logs" / f"{server}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log:
        log.write("".join(f"{line}\n" for line in lines))


def start_mark() -> str:
    return f"{LOG_MARK.lstrip()}2026-11-29 10:00:00 {STARTING} /opt/server run"


def stop_mark() -> str:
    return f"{LOG_MARK.lstrip()}2026-11-29 10:05:00 {STOPPING}"


def rounds_until_done(resumer: Resumer, now: float) -> None:
    for process in list(resumer.running.values()):
        process.wait(10)
    resumer.round(now)


def launches(server: str) -> float:
    return resume.RESUMES.labels(server, "ok")._value.get()


@pytest.fixture
def live_process(tmp_path: Path) -> Iterator[subprocess.Popen]:
    """A process the launcher would take for its server of ``tmp_path``: its command line names
    the run directory."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(tmp_path)])
    (tmp_path / "pids").mkdir(exist_ok=True)
    (tmp_path / "pids" / "influxdb.pid").write_text(str(process.pid))
    yield process
    process.kill()
    process.wait()


def test_the_log_is_read_from_the_launchers_last_start_or_stop(tmp_path: Path) -> None:
    logged(tmp_path, "kafka", "old: No space left on device", start_mark(), "fine")
    assert since_last_start(tmp_path / "logs" / "kafka.log").endswith("fine\n")
    logged(tmp_path, "kafka", "ERROR ... No space left on device", stop_mark(), "after")
    assert since_last_start(tmp_path / "logs" / "kafka.log") == f"{stop_mark()}\nafter\n"
    logged(tmp_path, "other", "no mark at all")  # rotated away: only lines written since
    assert since_last_start(tmp_path / "logs" / "other.log") == "no mark at all\n"
    assert since_last_start(tmp_path / "logs" / "missing.log") == ""


def test_a_kafka_node_that_logged_a_full_disk_and_stopped_is_started_once_there_is_room(
    tmp_path: Path, disk: Disk
) -> None:
    logged(tmp_path, "kafka", start_mark(), "java.io.IOException: No space left on device")
    resumer = Resumer({"kafka": tmp_path}, tmp_path)
    before = launches("kafka")
    disk.free = 0
    resumer.round(0.0)
    assert not resumer.running  # no room yet
    disk.free = 50 << 20
    resumer.round(1.0)
    assert "kafka" in resumer.running
    rounds_until_done(resumer, 2.0)  # reaped; not again within the retry interval
    assert launches("kafka") == before + 1 and not resumer.running
    resumer.round(1.0 + RETRY_S / 2)
    assert not resumer.running
    resumer.round(1.0 + RETRY_S)  # the start did not help (the log says so): once more
    assert "kafka" in resumer.running
    rounds_until_done(resumer, 2.0 + RETRY_S)
    logged(tmp_path, "kafka", stop_mark())  # a person stopped it: left alone
    resumer.round(3.0 + 2 * RETRY_S)
    assert not resumer.running and launches("kafka") == before + 2


def test_influxdb_is_restarted_only_when_this_reporter_saw_its_disk_full_under_the_same_process(
    tmp_path: Path, disk: Disk, live_process: subprocess.Popen
) -> None:
    resumer = Resumer({"influxdb": tmp_path}, tmp_path)
    before = launches("influxdb")
    resumer.round(0.0)
    assert not resumer.running  # never full: nothing to do
    disk.free = 0
    resumer.round(1.0)
    assert not resumer.running  # full, no room yet
    disk.free = 50 << 20
    resumer.round(2.0)
    assert "influxdb" in resumer.running
    rounds_until_done(resumer, 3.0)
    assert launches("influxdb") == before + 1
    resumer.round(3.0 + RETRY_S)  # seen full before this launch, not since
    assert not resumer.running


def test_a_stopped_influxdb_is_left_stopped(tmp_path: Path, disk: Disk) -> None:
    resumer = Resumer({"influxdb": tmp_path}, tmp_path)
    disk.free = 0
    resumer.round(0.0)
    disk.free = 50 << 20
    resumer.round(1.0)
    assert not resumer.running


def test_room_is_where_the_disk_alert_ends() -> None:
    rules = (REPO_ROOT / "prometheus" / "alerts.yml").read_text()
    bound = re.search(r"data_dir_free_bytes / data_dir_filesystem_bytes < ([0-9.]+)", rules)
    assert bound and float(bound.group(1)) == ROOM_SHARE


def test_only_watched_directories_can_be_resumed() -> None:
    settings = DiskSpaceSettings.from_sources(
        environ={"DISK_WATCH": "kafka=/a,influxdb=/b", "DISK_RESUME": "kafka,mosquitto"}
    )
    with pytest.raises(ValueError, match="mosquitto"):
        check(settings)
