"""The join's state function sets a far-future record aside and joins the rest as if it had
never come (no Spark: the GroupState is a stand-in, ``FakeGroupState``)."""

from __future__ import annotations

from datetime import timedelta

import pandas as pd

from spark_jobs.config import JoinSettings
from spark_jobs.passes import join_function, join_plan
from tests.support.group_state import FakeGroupState

NOW_MS = 1_700_000_000_000


def joined(rows: list[tuple[str, int, float, str]]) -> pd.DataFrame:
    plan = join_plan(JoinSettings.from_sources(cli={"pairs": "speed:torque:mechanical_power"}))
    frame = pd.DataFrame(rows, columns=["quantity", "event_time_ms", "value", "row_id"]).assign(
        kafka_partition=0, kafka_offset=range(len(rows))
    )
    out = list(
        join_function(plan, max_future=timedelta(hours=1))(
            ("T1",), iter([frame]), FakeGroupState(None, NOW_MS)
        )
    )
    return pd.concat(out, ignore_index=True)


def test_a_far_future_record_is_set_aside_and_changes_no_pair() -> None:
    base = [
        ("speed", 1000, 1.0, "a"),
        ("torque", 1500, 2.0, "b"),
        ("speed", 2000, 3.0, "c"),
        ("torque", 2500, 4.0, "d"),
        ("speed", 3000, 5.0, "e"),
    ]
    bad = ("torque", NOW_MS + 3_600_001, 9.0, "bad-clock")
    clean, with_bad = joined(base), joined(base[:2] + [bad] + base[2:])
    pairs = with_bad[with_bad["record_type"] == "joined"].reset_index(drop=True)
    assert (
        pairs.equals(clean[clean["record_type"] == "joined"].reset_index(drop=True))
        and len(pairs) >= 4
    )
    late = with_bad[with_bad["record_type"] == "late"]
    assert late[["quantity", "event_time_ms", "row_id", "reason"]].values.tolist() == [
        ["torque", NOW_MS + 3_600_001, "bad-clock", "future_timestamp"]
    ]
    at_bound = joined(base[:2] + [("torque", NOW_MS + 3_600_000, 9.0, "x")] + base[2:])
    assert (
        at_bound["reason"] == "future_timestamp"
    ).sum() == 0  # at the bound: an ordinary (new) record
