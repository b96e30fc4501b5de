"""Server logs kept within a size: a log past it is copied aside and truncated while its writer
goes on appending, the copies are at most ``keep``, and the disk reporter does it on its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from stacktools.harness.scrape import scrape_metrics
from stacktools.stack.disk_space import ROUND_S
from stacktools.stack.log_rotation import rotate_logs, rotated
from stacktools.stack.process import free_port
from streamkit.deadline import wait_until
from streamkit.paths import REPO_ROOT

#: A server as the launcher starts one: its output appended to the log it was handed.
WRITER = """
import sys, time
for n in range(int(sys.argv[1])):
    sys.stdout.write(f"line {n:08d} " + "x" * 80 + "\\n")
    sys.stdout.flush()
    if n % 200 == 0:
        time.sleep(0.001)
"""


def start_writer(log: Path, lines: int) -> subprocess.Popen:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "ab") as out:
        return subprocess.Popen([sys.executable, "-c", WRITER, str(lines)], stdout=out)


def numbers(path: Path) -> list[int]:
    return [int(line.split()[1]) for line in path.read_text().splitlines()]


def test_a_log_rotated_under_its_writer_stays_bounded_and_in_order(tmp_path: Path) -> None:
    log, other = tmp_path / "kafka.log", tmp_path / "small.log"
    other.write_text("a line\n")
    writer = start_writer(log, 60_000)
    sizes, rounds = [], 0
    while writer.poll() is None:
        rounds += len(rotate_logs(tmp_path, 256 * 1024, keep=2))
        sizes.append(log.stat().st_size)
    rotate_logs(tmp_path, 256 * 1024, keep=2)
    assert writer.returncode == 0 and rounds >= 3
    assert not rotated(log, 3).exists() and rotated(log, 2).exists()
    assert other.read_text() == "a line\n" and not rotated(other, 1).exists()
    # an append after the truncation lands at the new end: no hole of zeros, whole lines
    data = rotated(log, 1).read_bytes() + log.read_bytes()
    assert b"\0" not in data and data.endswith(b"\n")
    seen = numbers(rotated(log, 2)) + numbers(rotated(log, 1)) + numbers(log)
    assert seen == sorted(seen) and seen[-1] == 59_999  # the copies are the log's latest lines
    assert all(line.startswith("line ") for line in log.read_text().splitlines())


def test_the_disk_reporter_rotates_its_log_directory(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    big = logs / "influxdb.log"
    big.write_bytes(b"x" * 5000 + b"\n")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "stacktools.stack.disk_space", "--metrics-port", str(port)]
        + ["--disk-watch", f"data={tmp_path}", "--log-dir", str(logs), "--log-max-size", "4k"],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(lambda: scrape_metrics(port), 30, "its /metrics", interval_s=0.2)
        wait_until(lambda: rotated(big, 1).exists(), 3 * ROUND_S, "rotated", interval_s=0.2)
        assert big.stat().st_size == 0 and rotated(big, 1).stat().st_size == 5001
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    finally:
        process.kill()
        process.wait()
