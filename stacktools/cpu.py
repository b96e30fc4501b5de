"""CPU time of whole processes and process groups, from /proc: what a stage costs per record.

A service runs in a process group of its own (stacktools.processes), so its group holds the
Spark driver's JVM and Python workers too; workers that exited count through the ``cutime`` of
the process that waited for them."""
from __future__ import annotations

import os
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid_dir: Path) -> list[str] | None:
    """/proc/<pid>/stat from the field after the command name on (the name may hold spaces)."""
    try:
        text = (pid_dir / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def _cpu_s(fields: list[str]) -> float:
    """utime + stime + cutime + cstime (fields 14-17 of stat; here from index 11 on)."""
    return sum(int(value) for value in fields[11:15]) / TICKS_PER_S


def group_cpu_seconds(pgid: int) -> float:
    """CPU seconds of every live process in the group, with the children each has waited for."""
    total = 0.0
    for pid_dir in Path("/proc").iterdir():
        if pid_dir.name.isdigit():
            fields = _stat_fields(pid_dir)
            if fields is not None and int(fields[2]) == pgid:
                total += _cpu_s(fields)
    return total


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds of one process and the children it has waited for (0 when it is gone)."""
    fields = _stat_fields(Path("/proc") / str(pid))
    return 0.0 if fields is None else _cpu_s(fields)
