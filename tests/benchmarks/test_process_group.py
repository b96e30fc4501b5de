"""The benchmarks' process-group sampler: CPU over a window, including the last moments of a
group whose leader exits right after its work (what the peer benchmark's windows end on)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from benchmarks.support.process_group import GroupSampler


def test_the_cpu_of_a_leader_that_exits_at_once_is_still_seen() -> None:
    busy = (
        "import time\ntime.sleep(0.5)\nend = time.process_time() + 0.6\n"
        "while time.process_time() < end: pass\n"
    )
    child = subprocess.Popen([sys.executable, "-c", busy], start_new_session=True)
    with GroupSampler(
        child.pid, interval_s=5
    ) as sampler:  # only the first sample and the one at exit
        assert sampler.wait(child) == 0
    assert len(sampler.times) == 2
    # 10 ms clock ticks
    assert 0.5 <= sampler.cpu_between(sampler.times[0], sampler.times[-1]) < 3.0
    assert sampler.peak_total_mb > 0


def test_cpu_is_interpolated_between_samples_and_a_window_past_them_fails() -> None:
    sampler = GroupSampler(0)
    sampler.times, sampler.cpu = [10.0, 12.0, 14.0], [1.0, 2.0, 6.0]
    assert sampler.cpu_at(9.0) == 1.0
    assert sampler.cpu_at(11.0) == pytest.approx(1.5)
    assert sampler.cpu_between(11.0, 13.0) == pytest.approx(4.0 - 1.5)
    with pytest.raises(RuntimeError, match="not sampled after"):
        sampler.cpu_between(11.0, time.time())
