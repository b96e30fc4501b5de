"""The sampling profilers benchmarks/profile_batch.py attaches to a running job: py-spy on Python
processes, JFR on JVMs (and the reading of its samples), and finding those processes among a
run's process groups: the JVMs that run tasks and the PySpark worker daemons."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from benchmarks.support.profile_phases import parse_jfr_samples
from benchmarks.support.timing import status
from stacktools.harness.cpu import group_pids

PYSPY = Path(sys.executable).parent / "py-spy"


class PySpy:
    """py-spy record of some processes (and their forked children) until stopped; raw format,
    without --idle (CPU, not waiting) and non-blocking (the target is never paused)."""

    def __init__(self, pids: list[int], out: Path, rate: int, subprocesses: bool) -> None:
        self.spies = []
        for pid in pids:
            command = [
                str(PYSPY),
                "record",
                "--format",
                "raw",
                "--rate",
                str(rate),
                "--nonblocking",
                "--full-filenames",
                "-o",
                str(out.with_name(f"{out.stem}-{pid}.txt")),
                "-p",
                str(pid),
                *(["--subprocesses"] if subprocesses else []),
            ]
            self.spies.append(
                subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            )

    def stop(self) -> None:
        for spy in self.spies:
            if spy.poll() is None:
                spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
        for spy in self.spies:
            try:
                spy.wait(60)
            except subprocess.TimeoutExpired:
                spy.kill()
            if spy.returncode not in (0, -signal.SIGINT) and spy.stderr is not None:
                status(f"py-spy: {spy.stderr.read().decode(errors='replace')[-300:]}")


class Jfr:
    """A JFR recording (the JDK's "profile" settings) of running JVMs, dumped on stop."""

    def __init__(self, pids: list[int], out: Path) -> None:
        self.pids, self.out = pids, out
        for pid in pids:
            self._jcmd(pid, "JFR.start", "name=profile", "settings=profile")

    @staticmethod
    def _jcmd(pid: int, *command: str) -> None:
        done = subprocess.run(["jcmd", str(pid), *command], capture_output=True, text=True)
        if done.returncode != 0:
            status(f"jcmd {pid} {command[0]}: {(done.stdout + done.stderr)[-300:]}")

    def stop(self) -> None:
        for pid in self.pids:
            target = self.out.with_name(f"{self.out.stem}-{pid}.jfr")
            self._jcmd(pid, "JFR.stop", "name=profile", f"filename={target}")
        self.pids = []


def jvm_samples(paths: list[Path]) -> dict[tuple[str, str], int]:
    """JFR execution samples by (thread kind, category), over several recordings."""
    total: dict[tuple[str, str], int] = {}
    for path in paths:
        command = ["jfr", "print", "--stack-depth", "64", "--events", "jdk.ExecutionSample"]
        with subprocess.Popen([*command, str(path)], stdout=subprocess.PIPE, text=True) as jfr:
            assert jfr.stdout is not None
            for key, count in parse_jfr_samples(jfr.stdout).items():
                total[key] = total.get(key, 0) + count
    return total


def jvms(pgids: list[int]) -> list[int]:
    """The JVMs that run the batches' tasks among these groups' processes: the driver's (in
    local mode its executor too) and the cluster's executors, not the worker daemons."""
    found = []
    for pgid in pgids:
        for pid in group_pids(pgid):
            cmd = _cmdline(pid)
            if cmd.split(b"\0", 1)[0].endswith(b"java") and b"deploy.worker.Worker" not in cmd:
                found.append(pid)
    return sorted(set(found))


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _is_daemon(cmdline: bytes) -> bool:
    """A Python process running the worker daemon module (the JVM's command line names it too,
    in its Spark settings)."""
    return b"\0-m\0spark_jobs.python_daemon" in cmdline and not cmdline.split(b"\0", 1)[0].endswith(
        b"java"
    )


def python_daemons(pgids: list[int]) -> list[int]:
    """The PySpark worker daemons among these groups' processes (not their forked workers,
    which py-spy --subprocesses follows from the daemon)."""

    def parent(pid: int) -> int:
        try:
            return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            return 0

    found = []
    for pgid in pgids:
        for pid in group_pids(pgid):
            if _is_daemon(_cmdline(pid)) and not _is_daemon(_cmdline(parent(pid))):
                found.append(pid)
    return sorted(set(found))
