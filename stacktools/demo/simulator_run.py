"""The demo's simulator, watched: done once it has logged its summary or exited, whichever
comes first, so the demo never polls a replay that is over until its timeout, and says what it
published, what it rejected and how it ended."""

from __future__ import annotations

import json
import subprocess
import time

from stacktools.harness.processes import ServiceProcess

#: How the simulator's summary starts in its log (its first key).
SUMMARY_START = '{\n  "rows_published"'


def parse_summary(text: str) -> dict:
    """The last summary the simulator printed in ``text`` (its log), or {} (none yet, or cut)."""
    start = text.rfind(SUMMARY_START)
    if start < 0:
        return {}
    try:
        summary = json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError:
        return {}
    return summary if isinstance(summary, dict) else {}


class SimulatorRun:
    """One simulator process of a replay. Its summary is final once logged (the process may
    linger a few seconds after it, keeping /metrics up for the last scrapes)."""

    def __init__(self, service: ServiceProcess) -> None:
        self.service = service
        self.summary: dict | None = None  # set once: the summary, or {} if it exited without one

    def exit_code(self) -> int | None:
        process = self.service.process
        return None if process is None else process.poll()

    def finished(self) -> bool:
        """Whether the replay is over; reads the summary the first time it is."""
        if self.summary is None:
            # before reading the log: an exit's last words are in it
            exited = self.exit_code() is not None
            summary = parse_summary(self.service.logged_since_start())
            if summary or exited:
                self.summary = summary
        return self.summary is not None

    @property
    def published(self) -> int:
        return int((self.summary or {}).get("rows_published", 0))

    def failed(self) -> bool:
        """Over with nothing to wait for downstream: exited non-zero, or published nothing."""
        return self.finished() and (self.exit_code() not in (None, 0) or self.published == 0)

    def wait(self, seconds: float) -> None:
        """The watch loop's tick: ``seconds``, but over at once when the running process exits."""
        process = self.service.process
        if process is None or process.poll() is not None:
            time.sleep(seconds)
            return
        try:
            process.wait(seconds)
        except subprocess.TimeoutExpired:
            pass

    def last_words(self) -> str:
        """The last line the simulator logged (a refusal is one line): for an exit that failed."""
        lines = [line for line in self.service.logged_since_start().splitlines() if line.strip()]
        return lines[-1][:300] if lines else "(nothing logged)"

    def describe(self) -> str:
        """One line for the demo's output once ``finished()``."""
        summary = self.summary or {}
        rejected = int(summary.get("rows_rejected", 0))
        said = f"published {self.published:,} rows" + (
            f", rejected {rejected:,} (see summary.json)" if rejected else ""
        )
        code = self.exit_code()
        if code not in (None, 0):
            return f"simulator exited with code {code}: {said}; its last line: {self.last_words()}"
        if not summary:
            return f"simulator exited without a summary; its last line: {self.last_words()}"
        return f"simulator done: {said}"
