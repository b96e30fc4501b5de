"""The soak benchmark's arithmetic and its look at /proc (the run itself is a benchmark)."""

from __future__ import annotations

import os
from datetime import timedelta

import numpy as np
import pytest

from benchmarks.soak import disk_mb, process_figures, scaled_retention, slopes
from spark_jobs.config import JoinSettings
from streamkit.durations import parse_duration


def test_a_slope_an_hour_after_the_warm_up_and_cpu_per_record() -> None:
    times = np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    rows = [
        {
            "records": 1000.0 * t,
            "bridge.rss_mb": 50 + (10 * t if t >= 0.5 else 30),
            "bridge.cpu_s": 2.0 * t,
        }
        for t in times
    ]
    found = {figure: (level, slope) for figure, level, slope in slopes(times, rows, 0.5)}
    level, slope = found["bridge.rss_mb"]
    assert level == pytest.approx(55) and slope == pytest.approx(10)  # the warm-up's jump ignored
    per_record, none = found["bridge.cpu_us_per_record"]
    assert per_record == pytest.approx(2.0 / 1000 * 1e6) and none is None
    assert found["records"][1] == pytest.approx(1000)


def test_a_process_group_is_read_from_proc(tmp_path) -> None:
    figures = process_figures(os.getpgid(0))
    assert figures["rss_mb"] > 1 and figures["fds"] >= 3 and figures["threads"] >= 1
    assert figures["cpu_s"] > 0
    (tmp_path / "f").write_bytes(b"x" * 1_000_000)
    assert disk_mb(tmp_path) >= 1.0


def test_the_replay_scales_the_state_retention_to_the_same_event_time() -> None:
    default = JoinSettings.from_sources({}).state_retention
    retention = parse_duration(scaled_retention(1000.0)["STATE_RETENTION"])
    assert retention.total_seconds() == round(default.total_seconds() / 1000)
    assert parse_duration(scaled_retention(1e9)["STATE_RETENTION"]) == timedelta(seconds=1)
