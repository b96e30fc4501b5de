"""Timing of in-process benchmarks: the best of a few runs by wall time, with the CPU time of
that run (this process and the children it waited for), which moves much less than wall time
on a shared machine."""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def status(msg: str) -> None:
    """A progress line on stderr, so stdout keeps only the results."""
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cpu_seconds() -> float:
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def best_of(fn: Callable[[], T], repeat: int, label: str) -> tuple[T, float, float]:
    """(result, wall s, CPU s) of the fastest of ``repeat`` runs."""
    best: tuple[T, float, float] | None = None
    for n in range(repeat):
        w0, c0 = time.perf_counter(), cpu_seconds()
        out = fn()
        wall, cpu = time.perf_counter() - w0, cpu_seconds() - c0
        status(f"{label} run {n + 1}/{repeat}: {wall:.3f}s wall, {cpu:.3f}s cpu")
        if best is None or wall < best[1]:
            best = (out, wall, cpu)
    assert best is not None, "repeat must be at least 1"
    return best
