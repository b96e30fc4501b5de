"""Local server processes: start detached, remember by pid file, stop only our own.

A pid file alone is not proof of ownership (pids are reused), so a process counts as ours only
while its command line still names our run directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from stacktools.stack.errors import LauncherError, StackTimedOut
from streamkit.deadline import TimedOut, wait_until
from streamkit.paths import private_directory, private_file

#: What the servers and everything the launcher writes into the run directory create is the
#: stack user's alone: files 0600, directories 0700 (configurations hold passwords, data
#: directories the pipeline's data).
PRIVATE_UMASK = 0o077


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """Files and directories made meanwhile, by this process and the children it starts, are
    private (:data:`PRIVATE_UMASK`). The umask is the process's: a thread that creates a file
    meanwhile makes it private too, never more open."""
    previous = os.umask(PRIVATE_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int, host: str = "127.0.0.1", timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def port_owner(port: int) -> str:
    """Best effort 'pid N (cmd)' of whoever listens on a port, for error messages."""
    try:
        out = subprocess.run(
            ["ss", "-H", "-ltnp", f"sport = :{port}"], capture_output=True, text=True, timeout=5
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown process"
    return out.split("users:", 1)[1].strip() if "users:" in out else "unknown process"


def tail(path: Path, lines: int = 30) -> str:
    if not path.is_file():
        return f"(no log at {path})"
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - 64 * 1024))
        text = handle.read().decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:])


#: How the launcher marks in a server's log where it started or stopped it: what a reader of
#: the log since then (stacktools.stack.resume) looks for.
LOG_MARK = "\n--- "
STARTING = "starting:"
STOPPING = "stopping: asked by the launcher"


def mark_line(what: str) -> bytes:
    return f"{LOG_MARK}{time.strftime('%Y-%m-%d %H:%M:%S')} {what}\n".encode()


class ManagedProcess:
    """One server process identified by a pid file under the run directory."""

    def __init__(self, name: str, run_dir: Path) -> None:
        self.name = name
        self.run_dir = run_dir
        self.pid_file = run_dir / "pids" / f"{name}.pid"
        self.log_file = run_dir / "logs" / f"{name}.log"

    def mark(self, what: str) -> None:
        """A line in the log that says what the launcher did, and when."""
        try:
            with self.log_file.open("ab") as log:
                log.write(mark_line(what))
        except OSError:
            pass  # a log that cannot be written loses a line, not the stop

    def pid(self) -> int | None:
        """The pid if the process is alive and still ours, else None (stale pid files are
        removed)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        state = _state(pid)
        cmdline = _cmdline(pid)
        # Inside execve (spark-class execs java a few seconds after it started) the new image
        # shows an empty command line for a moment: that is not another program, ask again.
        for _ in range(EXEC_RETRIES):
            if cmdline or state in {"Z", "X"}:
                break
            time.sleep(0.02)
            state, cmdline = _state(pid), _cmdline(pid)
        if str(self.run_dir) in cmdline and state not in {"Z", "X"}:
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def start(
        self, command: Sequence[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> int:
        """Start detached (own session) so it outlives the launcher; output goes to the log file.
        The server runs with :data:`PRIVATE_UMASK`; its log and pid file are private too."""
        private_directory(self.pid_file.parent)
        private_directory(self.log_file.parent)
        fd = os.open(self.log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(fd, 0o600)  # a log from before the launcher made them private
        with os.fdopen(fd, "ab") as log:
            log.write(mark_line(f"{STARTING} {' '.join(command)}"))
            log.flush()
            process = subprocess.Popen(
                list(command),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd or self.run_dir,
                env={**os.environ, **(env or {})},
                start_new_session=True,
                umask=PRIVATE_UMASK,
            )
        with private_file(self.pid_file) as pid_file:
            pid_file.write(str(process.pid).encode())
        # Until exec completes, /proc/<pid>/cmdline is empty and the process would not look like
        # ours yet; wait for that, so callers can rely on pid() right after start().
        try:
            wait_until(
                lambda: _cmdline(process.pid) or process.poll() is not None,
                5,
                f"{self.name} exec'd",
                interval_s=0.01,
            )
        except TimedOut:
            pass  # pid() will tell
        return process.pid

    def stop(self, timeout_s: float = 30.0) -> bool:
        """SIGTERM (servers flush and close cleanly), SIGKILL after the timeout. True if it was
        running."""
        pid = self.pid()
        if pid is None:
            return False
        self.mark(STOPPING)
        os.kill(pid, signal.SIGTERM)
        try:
            wait_until(
                lambda: self.pid() is None or not _reap_or_alive(pid),
                timeout_s,
                f"{self.name} stopped on SIGTERM",
                interval_s=0.2,
            )
        except TimedOut:
            os.kill(pid, signal.SIGKILL)
            try:  # a big JVM takes a moment to be torn down
                wait_until(
                    lambda: not _reap_or_alive(pid),
                    10,
                    f"{self.name} gone after SIGKILL",
                    interval_s=0.1,
                )
            except TimedOut:
                pass  # the pid file goes all the same: pid() checks the process is ours
        self.pid_file.unlink(missing_ok=True)
        return True

    def wait_until(self, healthy: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Poll until healthy; fail fast with the log tail if the process died or time ran out."""

        def started() -> bool:
            if healthy():
                return True
            if self.pid() is None:
                raise LauncherError(
                    f"{self.name} exited while starting ({what}); last lines of "
                    f"{self.log_file}:\n{tail(self.log_file)}"
                )
            return False

        try:
            wait_until(started, timeout_s, f"{self.name} healthy ({what})", interval_s=0.3)
        except TimedOut:
            raise StackTimedOut(
                f"{self.name} was not healthy ({what}) within {timeout_s:.0f}s; last lines of "
                f"{self.log_file}:\n{tail(self.log_file)}"
            ) from None


#: How often an empty command line is read again (20 ms apart) before the process is not ours.
EXEC_RETRIES = 25


def _stat_field(pid: int, index: int, missing: str) -> str:
    """Field ``index`` after the command name of /proc/<pid>/stat (0: the state), or
    ``missing`` when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[index]
    except (OSError, IndexError):
        return missing


def _state(pid: int) -> str:
    """The process's state letter (R, S, Z...), X when it is gone."""
    return _stat_field(pid, 0, "X")


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode("utf-8", "replace")
        )
    except OSError:
        return ""


def _reap_or_alive(pid: int) -> bool:
    """Our own children must be reaped or they linger as zombies that look alive."""
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or ''."""
    return _stat_field(pid, 19, "")


class KeptService:
    """A pipeline service that the demo left running (``--keep-running``), so that ``stack
    down`` stops it and ``stack status`` shows it. Its pid file holds the pid and the process's
    start time: pids are reused, and a service's command line does not name the run directory.
    The service runs in a process group of its own (a Spark driver with its JVM and Python
    workers), and the whole group is stopped."""

    def __init__(self, name: str, run_dir: Path) -> None:
        self.name = name
        self.pid_file = run_dir / "pids" / "services" / f"{name}.pid"

    @classmethod
    def record(cls, run_dir: Path, name: str, pid: int, log: Path) -> None:
        kept = cls(name, run_dir)
        private_directory(kept.pid_file.parent.parent)
        private_directory(kept.pid_file.parent)
        with private_file(kept.pid_file) as handle:
            handle.write(f"{pid} {_start_time(pid)} {log}\n".encode())

    @classmethod
    def all(cls, run_dir: Path) -> list[KeptService]:
        return [
            cls(path.stem, run_dir)
            for path in sorted((run_dir / "pids" / "services").glob("*.pid"))
        ]

    def _fields(self) -> list[str]:
        try:
            return self.pid_file.read_text().split(maxsplit=2)
        except OSError:
            return []

    @property
    def log_file(self) -> str:
        fields = self._fields()
        return fields[2].strip() if len(fields) == 3 else "-"

    def pid(self) -> int | None:
        """The pid while that very process lives (same start time), else None (the file goes)."""
        fields = self._fields()
        if (
            len(fields) >= 2
            and fields[0].isdigit()
            and fields[1]
            and _start_time(int(fields[0])) == fields[1]
        ):
            return int(fields[0])
        self.pid_file.unlink(missing_ok=True)
        return None

    def stop(self, timeout_s: float) -> bool:
        """SIGTERM to the group (the service flushes and commits), SIGKILL to the group after
        ``timeout_s``. True if it was running."""
        pid = self.pid()
        if pid is None:
            return False
        _signal_group(pid, signal.SIGTERM)
        try:
            wait_until(
                lambda: not group_alive(pid),
                timeout_s,
                f"{self.name} stopped on SIGTERM",
                interval_s=0.2,
            )
        except TimedOut:
            _signal_group(pid, signal.SIGKILL)
            try:
                wait_until(
                    lambda: not group_alive(pid),
                    10,
                    f"{self.name} gone after SIGKILL",
                    interval_s=0.1,
                )
            except TimedOut:
                pass
        self.pid_file.unlink(missing_ok=True)
        return True


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def group_alive(pgid: int) -> bool:
    """Any process of the group still there (the leader reaped first if it is our child)."""
    _reap_or_alive(pgid)
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
