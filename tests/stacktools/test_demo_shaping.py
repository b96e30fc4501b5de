"""The demo plots' data shaping: gaps become line breaks, the busiest machine and stretch are
the ones shown, window tags and quantities are said in words and units."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from stacktools.demo.shaping import (
    axis_label,
    break_gaps,
    busiest,
    busiest_stretch,
    duration_words,
    gap_threshold,
    mattering,
    preferred_window,
    stretches,
    window_slide_ms,
    window_words,
)


def _times(seconds: list[float]) -> pd.Series:
    return pd.to_datetime(pd.Series(seconds) * 1000, unit="ms")


def test_a_gap_is_several_times_the_typical_spacing() -> None:
    times = _times([0, 1, 2, 3, 4, 3600, 3601])
    assert gap_threshold(times) == pd.Timedelta(seconds=5)
    assert gap_threshold(_times([7])) is None
    assert gap_threshold(pd.Series([1.0, 1.0, 3.0])) == 10.0  # repeated times do not count


def test_a_line_breaks_at_every_gap_and_nowhere_else() -> None:
    frame = pd.DataFrame(
        {"time": _times([3600, 0, 1, 2, 3601, 7200]), "value": [10, 1, 2, 3, 11, 20]}
    )
    broken = break_gaps(frame)
    values = broken["value"].tolist()
    assert len(broken) == 8
    assert values[:3] == [1, 2, 3] and math.isnan(values[3])
    assert values[4:6] == [10, 11] and math.isnan(values[6]) and values[7] == 20
    # the break sits one typical spacing after the point before the gap
    assert broken["time"].iloc[3] == pd.Timestamp(0) + pd.Timedelta(seconds=3)
    assert broken["time"].is_monotonic_increasing


def test_no_gap_no_break_and_tiny_frames_pass_through() -> None:
    frame = pd.DataFrame({"time": _times([0, 1, 2, 3]), "value": [1.0, 2.0, 3.0, 4.0]})
    assert break_gaps(frame).equals(frame)
    single = frame.iloc[:1]
    assert break_gaps(single).equals(single)


def test_windows_break_after_a_missing_window_and_the_last_step_ends() -> None:
    frame = pd.DataFrame({"time": _times([0, 10, 30]), "mean": [1, 2, 3], "window": ["w"] * 3})
    ten = pd.Timedelta(seconds=10)
    broken = break_gaps(frame, threshold=ten, end=ten)
    assert broken["time"].tolist() == list(_times([0, 10, 20, 30, 40]))
    assert [v if not math.isnan(v) else None for v in broken["mean"]] == [1, 2, None, 3, None]


def test_the_busiest_stretch_is_the_run_without_a_gap_with_most_points() -> None:
    times = _times([0, 1, 2, 100, 101, 102, 103, 500, 501, 502, 503])
    assert [(s.start, s.stop) for s in stretches(times)] == [(0, 3), (3, 7), (7, 11)]
    start, end, size = busiest_stretch(times) or (None, None, 0)
    assert (start, end, size) == (times[3], times[6], 4)  # the earliest of equals
    assert busiest_stretch(_times([])) is None


def test_the_busiest_machine_has_most_records_not_the_first_name() -> None:
    assert busiest({"A1": 12, "R0815": 4372, "H31415": 616}) == "R0815"
    assert busiest({"B": 5, "A": 5}) == "A"
    assert busiest({}) is None and busiest({"A": 0}) is None


def test_power_speed_and_torque_come_first() -> None:
    names = ["aaAcc_C11", "cmdSpeed_C11", "vaTorque_C11", "actSpeed_C11", "vaPower_C11"]
    assert mattering(names) == ["vaPower_C11", "actSpeed_C11", "vaTorque_C11"]
    assert mattering(["b", "a", "vaLoad_C11"], at_most=2) == ["a", "b"]


def test_every_axis_says_its_unit() -> None:
    assert axis_label("actSpeed_C11") == "actSpeed_C11 [rpm]"
    assert axis_label("vaTorque_C11") == "vaTorque_C11 [Nm]"
    assert axis_label("mechanical_power") == "mechanical_power [W]"
    assert axis_label("vaCurr_C11") == "vaCurr_C11 [A]"
    assert axis_label("aaAcc_C11") == "aaAcc_C11 [unit unknown]"


def test_window_sizes_in_words() -> None:
    assert window_words("tumbling-10000") == "10 s tumbling"
    assert window_words("sliding-60000-10000") == "1 min sliding every 10 s"
    assert window_words("session-90000") == "sessions (90 s gap)"
    assert window_words("tumbling-1500") == "1500 ms tumbling"
    assert window_words("tumbling-7200000") == "2 h tumbling"
    assert window_words("hopping-5") == "hopping-5"
    assert duration_words(500) == "500 ms"


def test_the_plotted_window_is_the_shortest_tumbling_one() -> None:
    labels = ["sliding-60000-10000", "tumbling-60000", "tumbling-10000", "session-30000"]
    assert preferred_window(labels) == "tumbling-10000"
    assert preferred_window(["session-30000", "sliding-60000-10000"]) == "session-30000"
    assert preferred_window([]) is None
    assert window_slide_ms("sliding-60000-10000") == 10_000
    assert window_slide_ms("tumbling-10000") == 10_000
    assert window_slide_ms("session-30000") is None


def test_the_throughput_png_is_written_and_latency_ticks_reach_the_lowest_line(
    tmp_path: Path,
) -> None:
    from stacktools.demo import plots
    from stacktools.demo.sampler import Samples

    samples = Samples(times=[0.0, 1.0, 2.0], counters={"bridge records": [0.0, 50.0, 80.0]})
    written = plots.throughput(samples, tmp_path / "throughput.png")
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [plots._tick_below(v) for v in (0.23, 0.5, 1.7, 7.0)] == [0.2, 0.5, 1.0, 5.0]
