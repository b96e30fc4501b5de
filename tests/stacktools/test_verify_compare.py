"""verify's comparison without a server: the sample's expectation against itself as the points
InfluxDB would hold, then with one difference of each kind, and the live rule (records newer
than a Thing's cutoff may be missing, nothing may be wrong)."""

from __future__ import annotations

from functools import partial

import pandas as pd
import pytest

from stacktools.verify.check import Outcome, certain_so_far
from stacktools.verify.compare import compare
from stacktools.verify.events import read_records
from stacktools.verify.expect import expectation
from stacktools.verify.report import render
from stacktools.verify.resends import resent_copies
from stacktools.verify.rules import Pair, Rules, parse_windows
from streamkit.paths import REPO_ROOT

SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"
RULES = Rules((Pair("actSpeed_C11", "vaTorque_C11"),), None, parse_windows("10s", "", ""), 10_000)


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    return expectation(read_records(SAMPLE), RULES).frames


def stored(frame: pd.DataFrame) -> pd.DataFrame:
    """What an exact run leaves: every record but the windows the data has not closed."""
    if "pending" in frame.columns:
        frame = frame[~frame["pending"]]
    return frame.drop(columns=[c for c in ("pending", "closes_ms") if c in frame.columns])


def test_the_expectation_against_itself_is_exact(frames) -> None:
    for name, frame in frames.items():
        verdict = compare(name, frame, stored(frame))
        assert verdict.exact and verdict.matched == len(stored(frame)), verdict.as_dict()


def test_each_kind_of_difference_is_named_with_its_thing(frames) -> None:
    raw = stored(frames["raw"])
    verdict = compare("raw", frames["raw"], raw.drop(index=raw.index[5]))
    assert verdict.counts["missing"] == 1 and not verdict.counts["extra"]
    assert verdict.by_thing[str(raw.iloc[5]["thing"])]["missing"] == 1
    assert verdict.examples["missing"][0]["time_ms"] == int(raw.iloc[5]["time_ms"])

    joined = stored(frames["joined"])
    copy = joined.iloc[[3]].copy()
    copy["time_ns"] = copy["time_ns"] + 7  # the same pair on another point
    verdict = compare("joined", frames["joined"], pd.concat([joined, copy]))
    assert verdict.counts == {"missing": 0, "extra": 0, "duplicated": 1, "different": 0}
    assert verdict.examples["duplicated"][0]["points"] == 2

    windows = stored(frames["aggregate"]).copy()
    windows.loc[windows.index[2], "mean"] += 0.25
    verdict = compare("aggregate", frames["aggregate"], windows)
    assert verdict.counts == {"missing": 0, "extra": 0, "duplicated": 0, "different": 1}
    assert set(verdict.examples["different"][0]["values"]) == {"mean"}

    extra = raw.iloc[[0]].copy()
    extra["time_ms"] += 1
    extra["time_ns"] += 1_000_000
    verdict = compare("raw", frames["raw"], pd.concat([raw, extra]))
    assert verdict.counts["extra"] == 1 and verdict.counts["missing"] == 0


def test_live_requires_only_what_is_older_than_each_things_cutoff(frames) -> None:
    raw = stored(frames["raw"])
    newest = raw.groupby("thing", observed=True)["time_ms"].max()
    cutoff = {str(t): int(ms) - 60_000 for t, ms in newest.items()}
    for name, frame in frames.items():
        got = stored(frame)
        certain = certain_so_far(name, frame, cutoff, RULES.lateness_ms)
        # the newest records have not landed yet: not a difference
        keep = certain.to_numpy()[~frame["pending"].to_numpy()] if "pending" in frame else certain
        landed = got[pd.Series(keep, index=got.index)] if len(got) else got
        verdict = compare(name, frame, landed, certain)
        assert verdict.exact, (name, verdict.as_dict())
        if len(landed):
            verdict = compare(name, frame, landed.drop(index=landed.index[0]), certain)
            assert verdict.counts["missing"] == 1, name


def _late_copies(raw: pd.DataFrame, reason: str, value_shift: float = 0.0) -> pd.DataFrame:
    """Late points the join sets aside for raw records delivered a second time."""
    rows = raw.iloc[[1, 4]]
    return pd.DataFrame(
        {
            "thing": rows["thing"].astype(str).to_numpy(),
            "quantity": rows["quantity"].astype(str).to_numpy(),
            "stage": "join",
            "reason": reason,
            "time_ms": rows["time_ms"].to_numpy(),
            "time_ns": rows["time_ns"].to_numpy(),
            "value": rows["value"].to_numpy() + value_shift,
            "watermark_ms": rows["time_ms"].to_numpy() + 5,
            "count": 1,
        }
    )


def test_identical_resends_are_counted_apart_and_anything_else_stays_extra(frames) -> None:
    raw, late = stored(frames["raw"]), stored(frames["late"])
    resends = partial(resent_copies, frames["raw"])
    copies = pd.concat([late, _late_copies(raw, "behind_watermark")], ignore_index=True)
    verdict = compare("late", frames["late"], copies, resent=resends)
    assert verdict.exact and verdict.resent == 2, verdict.as_dict()
    assert "2 re-sent copies" in render(Outcome([verdict], 1, 1))

    for changed in (
        _late_copies(raw, "duplicate", value_shift=0.5),  # not the file's value
        _late_copies(raw, "future_timestamp"),  # not what a second copy is set aside as
    ):
        verdict = compare("late", frames["late"], pd.concat([late, changed]), resent=resends)
        assert verdict.counts["extra"] == 2 and verdict.resent == 0, verdict.as_dict()
    # without the re-send rule (the test suite's strictness) they are extra
    verdict = compare("late", frames["late"], copies)
    assert verdict.counts["extra"] == 2
