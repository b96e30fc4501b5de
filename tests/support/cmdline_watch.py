"""Every command line a local user could have read in ``ps`` while something ran, and which of
them held a password: the demo's servers and services, compose's containers (their processes are
the host's), an entry point's short-lived tools."""

from __future__ import annotations

import threading
import time

from tests.support import procfs


class CommandLineWatch:
    """Every distinct command line seen in /proc while it runs. Short-lived processes (a
    password tool runs for milliseconds) are caught by looking again, without pause, at each
    process seen for the first time in the last two seconds (its command line changes once it
    has exec'd); every other process is looked at twice a second."""

    YOUNG_S = 2.0
    EVERY_S = 0.5

    def __init__(self) -> None:
        self.seen: dict[bytes, int] = {}  # command line -> a pid that had it
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cmdline-watch", daemon=True)

    def _run(self) -> None:
        first_seen: dict[int, float] = {}
        last_full = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            full = now - last_full >= self.EVERY_S
            last_full = now if full else last_full
            for pid in procfs.pids():
                if full or now - first_seen.setdefault(pid, now) < self.YOUNG_S:
                    line = procfs.cmdline(pid)
                    if line:
                        self.seen.setdefault(line, pid)
            self.rounds += 1
            time.sleep(0.001)

    def look_once_more(self) -> None:
        """Every process up now (those left running among them)."""
        for pid in procfs.pids():
            self.seen.setdefault(procfs.cmdline(pid), pid)

    def leaks(self, passwords: dict[str, str]) -> list[str]:
        """One line per command line that held any of ``passwords`` (name -> value), the
        values masked."""
        findings = []
        for line, pid in list(self.seen.items()):  # the watch may still be adding to it
            leaked = holding(line, passwords)
            if leaked:
                shown = line.replace(b"\0", b" ").decode("utf-8", "replace")
                for value in passwords.values():
                    shown = shown.replace(value, "<password>")
                findings.append(f"command line of pid {pid} holds {leaked}: {shown[:300]}")
        return findings

    def start(self) -> CommandLineWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def __enter__(self) -> CommandLineWatch:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def holding(data: bytes, passwords: dict[str, str]) -> list[str]:
    """The names of the passwords that ``data`` contains."""
    return sorted(name for name, value in passwords.items() if value.encode() in data)
