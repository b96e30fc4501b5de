"""The services as processes: ``python -m <module>`` in a process group of its own, exactly as a
user runs them, for the pipeline, the demo, the benchmarks and the stack tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from stacktools.stack.process import PRIVATE_UMASK, group_alive
from streamkit.deadline import wait_until
from streamkit.logs import LOG_FORMAT_ENV
from streamkit.paths import REPO_ROOT


class ServiceProcess:
    """One run of a service. kill -9 takes the whole group (for a Spark driver: its JVM and
    Python workers too), as a crash of the host would, so a restart never overlaps with
    leftovers of the killed run. Logs are appended across restarts; each run reads its own.
    They are JSON whatever LOG_FORMAT the caller has: the tools read them (ready lines, the
    simulator's summary)."""

    def __init__(
        self, module: str, args: list[str], log: Path, env: dict[str, str] | None = None
    ) -> None:
        self.module, self.args, self.log, self.env = module, args, log, env or {}
        self.process: subprocess.Popen | None = None
        self._log_offset = 0

    def start(self) -> ServiceProcess:
        self._log_offset = self.log.stat().st_size if self.log.exists() else 0
        log = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(log, "ab") as handle:
            self.process = subprocess.Popen(
                [sys.executable, "-m", self.module, *self.args],
                cwd=REPO_ROOT,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, LOG_FORMAT_ENV: "json", **self.env},
                umask=PRIVATE_UMASK,  # its checkpoints and state: the stack user's alone
            )
        return self

    @property
    def popen(self) -> subprocess.Popen:
        """The running (or exited) process of this run; an error before ``start``."""
        if self.process is None:
            raise RuntimeError(f"{self.module} was never started")
        return self.process

    def kill9(self) -> None:
        process = self.popen
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(10)
        wait_until(lambda: not group_alive(process.pid), 30, f"process group of {self.module} gone")

    def terminate(self, timeout_s: float = 30) -> int:
        process = self.popen
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout_s)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def logged_since_start(self) -> str:
        if not self.log.exists():
            return ""
        with self.log.open("rb") as handle:
            handle.seek(self._log_offset)
            return handle.read().decode(errors="replace")

    def wait_logged(self, text: str, timeout_s: float) -> None:
        """Until this run logged ``text`` (e.g. the bridge's "bridge running"); fails at once
        if the process exits first."""

        def logged() -> bool:
            if text in self.logged_since_start():
                return True
            if not self.alive():
                raise RuntimeError(
                    f"{self.module} exited before logging {text!r}: "
                    f"{self.logged_since_start()[-2000:]}"
                )
            return False

        wait_until(logged, timeout_s, f"{self.module} logging {text!r}")
