"""What a process group costs while a benchmark runs it: peak RSS per role and CPU seconds over
any time window, sampled from /proc in a background thread.

A Spark job ends soon after its last batch and a peer app right after its last commit, so the
CPU of a window is read from samples taken while they ran (interpolated at the window's ends),
plus one taken when the group's leader has exited but is not yet reaped (its CPU is still in
/proc then, gone after); the window comes from the run's own log (batch progress, first and
last record)."""

from __future__ import annotations

import bisect
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from stacktools.harness.cpu import group_pids, processes_cpu_seconds

#: cmdline (arguments joined by spaces) -> role, for the RSS breakdown
Classifier = Callable[[bytes], str]


def rss_mb(pids: list[int], classify: Classifier) -> dict[str, float]:
    """Current RSS per role of these processes."""
    out: dict[str, float] = {}
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            rss_kb = next(
                int(line.split()[1])
                for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmRSS:")
            )
        except (OSError, StopIteration):
            continue
        role = classify(cmd)
        out[role] = out.get(role, 0.0) + rss_kb / 1024
    return out


class GroupSampler:
    """Samples (wall time, group CPU seconds) and RSS every ``interval_s`` until stopped."""

    def __init__(
        self, pgid: int, classify: Classifier = lambda _: "all", interval_s: float = 0.2
    ) -> None:
        self.pgid, self.classify, self.interval_s = pgid, classify, interval_s
        self.times: list[float] = []
        self.cpu: list[float] = []
        self.peak_mb: dict[str, float] = {}
        self.peak_total_mb = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"sampler-{pgid}", daemon=True)

    def __enter__(self) -> GroupSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval_s):
                return

    def sample(self) -> None:
        with self._lock:
            try:
                os.killpg(self.pgid, 0)
            except ProcessLookupError:  # the group is gone: a read now would say 0 CPU
                return
            # the group and its descendants (stacktools.harness.cpu), found once a sample
            pids = group_pids(self.pgid)
            rss = rss_mb(pids, self.classify)
            now, cpu = time.time(), processes_cpu_seconds(pids)
            self.times.append(now)
            # an orphan leaving must not go back
            self.cpu.append(max(cpu, self.cpu[-1]) if self.cpu else cpu)
            for role, mb in rss.items():
                self.peak_mb[role] = max(self.peak_mb.get(role, 0.0), mb)
            self.peak_total_mb = max(self.peak_total_mb, sum(rss.values()))

    def wait(self, process: subprocess.Popen) -> int:
        """Until the group's leader exits; samples it once more before reaping it."""
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
        self.sample()
        return process.wait()

    def cpu_at(self, wall: float) -> float:
        """Group CPU seconds at wall time ``wall``, linear between the samples around it."""
        if not self.times:
            raise RuntimeError(f"no sample of process group {self.pgid}")
        i = bisect.bisect_left(self.times, wall)
        if i == 0:
            return self.cpu[0]
        if i == len(self.times):
            return self.cpu[-1]
        t0, t1, c0, c1 = self.times[i - 1], self.times[i], self.cpu[i - 1], self.cpu[i]
        return c0 + (c1 - c0) * (wall - t0) / (t1 - t0)

    def cpu_between(self, start: float, end: float) -> float:
        """CPU seconds the group used in [start, end]; fails when no sample lies at or after
        ``end`` (the group was gone: the tail would be missing)."""
        if not self.times or self.times[-1] < end:
            raise RuntimeError(f"process group {self.pgid} was not sampled after the window's end")
        return self.cpu_at(end) - self.cpu_at(start)
