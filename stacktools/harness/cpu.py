"""CPU time of whole processes and process groups, from /proc: what a stage costs per record.

A service runs in a process group of its own (stacktools.harness.processes), so its group holds the
Spark driver and its JVM. Its processes are that group and every descendant of it, wherever the
descendant went: PySpark's worker daemon moves itself and its Python workers into a group of
their own (``os.setpgid(0, 0)``), and counting the group alone missed all the Python time.
Processes that exited count through the ``cutime`` of the process that waited for them."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid_dir: Path) -> list[str] | None:
    """/proc/<pid>/stat from the field after the command name on (the name may hold spaces)."""
    try:
        text = (pid_dir / "stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2 :].split()


def _cpu_s(fields: list[str]) -> float:
    """utime + stime + cutime + cstime (fields 14-17 of stat; here from index 11 on)."""
    return sum(int(value) for value in fields[11:15]) / TICKS_PER_S


def _live_processes() -> dict[int, list[str]]:
    """pid -> its stat fields, of every process alive now."""
    table = {}
    for pid_dir in Path("/proc").iterdir():
        if pid_dir.name.isdigit():
            fields = _stat_fields(pid_dir)
            if fields is not None:
                table[int(pid_dir.name)] = fields
    return table


def _group_and_descendants(table: dict[int, list[str]], pgid: int) -> list[int]:
    """The group's members (stat field pgrp) and every descendant of one (by ppid)."""
    children: dict[int, list[int]] = defaultdict(list)
    for pid, fields in table.items():
        children[int(fields[1])].append(pid)
    found = {pid for pid, fields in table.items() if int(fields[2]) == pgid}
    pending = list(found)
    while pending:
        for child in children[pending.pop()]:
            if child not in found:
                found.add(child)
                pending.append(child)
    return sorted(found)


def group_pids(pgid: int) -> list[int]:
    """A service's processes: its process group and every descendant of a member."""
    return _group_and_descendants(_live_processes(), pgid)


def group_cpu_seconds(pgid: int) -> float:
    """CPU seconds of a service's live processes (:func:`group_pids`), with the children each
    has waited for."""
    return processes_cpu_seconds(group_pids(pgid))


def processes_cpu_seconds(pids: Iterable[int]) -> float:
    """CPU seconds of these processes, with the children each has waited for (0 for one gone)."""
    return sum(process_cpu_seconds(pid) for pid in pids)


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds of one process and the children it has waited for (0 when it is gone)."""
    fields = _stat_fields(Path("/proc") / str(pid))
    return 0.0 if fields is None else _cpu_s(fields)
