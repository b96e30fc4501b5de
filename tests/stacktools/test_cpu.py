"""CPU time from /proc, checked against the kernel's own account of a busy child process."""

from __future__ import annotations

import os
import subprocess
import sys

from stacktools.harness.cpu import group_cpu_seconds, group_pids, process_cpu_seconds
from tests.support.waits import settle


def test_a_busy_group_is_charged_its_cpu_time() -> None:
    busy = (
        "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
        "print('idle', flush=True)\ntime.sleep(30)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", busy], start_new_session=True, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None  # stdout=PIPE
    try:
        assert child.stdout.readline() == "idle\n"  # from now on its CPU time stands still
        own, group = process_cpu_seconds(child.pid), group_cpu_seconds(os.getpgid(child.pid))
        assert 0.5 <= own < 3.0, own  # clock ticks of 10 ms: the kernel may count 0.59 s of 0.6
        assert group == own  # the only process of its group
    finally:
        child.kill()
        child.wait()
    assert process_cpu_seconds(child.pid) == 0.0  # gone


def test_our_own_group_is_not_a_strangers() -> None:
    assert group_cpu_seconds(os.getpgid(0)) >= process_cpu_seconds(os.getpid()) > 0


def test_a_descendant_that_moved_to_a_group_of_its_own_is_still_charged_to_the_service() -> None:
    """As PySpark's worker daemon does with the Python workers (os.setpgid(0, 0))."""
    # it stays (idle) longer than the wait below may last, so the wait never sees it gone
    busy = (
        "import os, time\nos.setpgid(0, 0)\nend = time.process_time() + 0.6\n"
        "while time.process_time() < end: pass\nprint('idle', flush=True)\ntime.sleep(600)\n"
    )
    parent_code = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {busy!r}])\n"
        "child.wait()\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], start_new_session=True)
    moved: list[int] = []

    def child_busy_done() -> bool:
        nonlocal moved
        moved = [pid for pid in group_pids(parent.pid) if pid != parent.pid]
        return bool(moved) and process_cpu_seconds(moved[0]) >= 0.5

    try:
        # 0.6 s of CPU on a loaded machine can take many times that in wall time: 120 s only
        # catches a hang; the assertions below say what was found if it runs out
        settle(child_busy_done, 120, "the moved child's 0.5 s of CPU", interval_s=0.1)
        # it left the group
        assert len(moved) == 1 and os.getpgid(moved[0]) == moved[0] != parent.pid
        assert group_cpu_seconds(parent.pid) >= process_cpu_seconds(moved[0]) >= 0.5
    finally:
        for pid in group_pids(parent.pid):
            os.kill(pid, 9)
        parent.wait()
