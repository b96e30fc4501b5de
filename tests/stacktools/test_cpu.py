"""CPU time from /proc, checked against the kernel's own account of a busy child process."""
from __future__ import annotations

import os
import subprocess
import sys

from stacktools.cpu import group_cpu_seconds, process_cpu_seconds


def test_a_busy_group_is_charged_its_cpu_time() -> None:
    busy = ("import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
            "print('idle', flush=True)\ntime.sleep(30)\n")
    child = subprocess.Popen([sys.executable, "-c", busy], start_new_session=True, stdout=subprocess.PIPE, text=True)
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
