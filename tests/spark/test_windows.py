"""The window bookkeeping of the aggregate job, without Spark: assignment, merging, expiry."""
from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest

from spark_jobs.windows import WindowSpec, accumulate, expire, next_timer, parse_windows, set_aside, still_open
from streamkit.durations import parse_duration_ms


def test_durations_and_specs() -> None:
    assert [parse_duration_ms(t) for t in ("500ms", "10s", "10", "1m", "2h", "1.5s")] == [
        500, 10_000, 10_000, 60_000, 7_200_000, 1500]
    for bad in ("", "ten", "-1s", "0s", "0.5ms"):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)
    assert parse_windows("10s", "60s/10s") == [WindowSpec("tumbling", 10_000, 10_000),
                                               WindowSpec("sliding", 60_000, 10_000)]
    assert parse_windows("off", "1m/30s")[0].label == "sliding-60000-30000"
    for tumbling, sliding in (("off", ""), ("10s", "60s"), ("10s", "10s/60s")):
        with pytest.raises(ValueError):
            parse_windows(tumbling, sliding)


@pytest.mark.parametrize("size,slide", [(10_000, 10_000), (60_000, 20_000), (50_000, 20_000), (1000, 1000)])
def test_every_window_containing_a_time_and_no_other(size: int, slide: int) -> None:
    times = np.array([0, 1, 9_999, 10_000, 59_999, 1_554_096_380_468, -1, -25_000], dtype=np.int64)
    rows, starts = WindowSpec("sliding", size, slide).starts(times)
    got = sorted(zip(rows.tolist(), starts.tolist()))
    want = sorted((i, s) for i, t in enumerate(times.tolist())
                  for s in range((t - size) // slide * slide, t + 1, slide) if s <= t < s + size and s % slide == 0)
    assert got == want


def test_merged_batches_equal_one_pass_and_expiry_is_final() -> None:
    rng = random.Random(3)
    times = np.array(sorted(rng.randrange(0, 100_000) for _ in range(400)), dtype=np.int64)
    values = np.array([rng.gauss(50, 20) for _ in range(400)])
    specs = parse_windows("10s", "30s/10s")
    split, whole = {}, {}
    for chunk in np.array_split(np.arange(400), 7):  # the same data in 7 micro-batches
        accumulate(split, specs, times[chunk], values[chunk])
    accumulate(whole, specs, times, values)
    assert split.keys() == whole.keys()
    for wid, (n, mean, m2, low, high) in whole.items():
        assert split[wid][0] == n and split[wid][3:] == [low, high]
        assert math.isclose(split[wid][1], mean, rel_tol=1e-12) and math.isclose(split[wid][2], m2, rel_tol=1e-9)
    tumbling = pd.DataFrame({"start": times // 10_000 * 10_000, "v": values}).groupby("start")["v"]
    for start, var in tumbling.var().items():
        n, _, m2, _, _ = whole[f"tumbling|10000|10000|{start}"]
        assert n < 2 or math.isclose(m2 / (n - 1), var, rel_tol=1e-9)

    timer = next_timer(whole)
    assert timer == 10_000 - 1  # fires once the watermark reaches the first window end
    closed = expire(whole, 30_000)
    assert {(kind, start) for kind, _, _, start, _ in closed} == {
        ("tumbling", 0), ("tumbling", 10_000), ("tumbling", 20_000), ("sliding", -20_000), ("sliding", -10_000),
        ("sliding", 0)}
    assert all(int(w.rsplit("|", 1)[1]) + int(w.split("|")[1]) > 30_000 for w in whole)
    assert expire(whole, 30_000) == []


def test_set_aside_is_strictly_below_the_watermark() -> None:
    batch = pd.DataFrame({"event_time_ms": [5, 10, 9, 11], "value": [1.0, 2.0, 3.0, 4.0], "row_id": list("abcd")})
    aside, on_time = set_aside(batch, 10, set())
    assert aside["event_time_ms"].tolist() == [5, 9] and on_time["event_time_ms"].tolist() == [10, 11]
    assert aside["reason"].tolist() == ["behind_watermark"] * 2


def test_set_aside_counts_each_record_once() -> None:
    """Re-sent records (same event time and row id) within a batch or across batches are
    duplicates; other records at the same time are not (joined pairs share event times); a
    repeat behind the watermark stays late, and only open identities are remembered."""
    batch = pd.DataFrame({"event_time_ms": [12, 11, 12, 20, 5, 12], "value": [1.0, 2.0, 1.0, 3.0, 4.0, 5.0],
                          "row_id": ["a", "b", "a", "d", "e", "f"]})
    aside, on_time = set_aside(batch, 10, {(20, "d"), (30, "x")})
    assert list(zip(on_time["event_time_ms"], on_time["row_id"])) == [(11, "b"), (12, "a"), (12, "f")]
    assert list(zip(aside["event_time_ms"], aside["row_id"], aside["reason"])) == [
        (5, "e", "behind_watermark"), (12, "a", "duplicate"), (20, "d", "duplicate")]
    assert still_open({(5, "a"), (11, "b"), (30, "c")}, 11) == {(11, "b"), (30, "c")}
