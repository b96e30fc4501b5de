"""Pattern pairs (``actSpeed_*:vaTorque_*``): every component a thing shows is joined exactly,
whatever the batch cuts and restore points, against the oracle's own expansion of the
patterns; a plan that could not say a record's component is refused."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsb import JoinOperator, PairSpec
from lsb.plan import JoinPlan, PatternPair
from lsb.results import mechanical_power, product
from operators import KeyedOperator, Pattern, Records
from operators.keyed import KeyedStates
from tests.oracles.join import Pair, pattern_join

from .helpers import LSB_SETTINGS

PLAN = JoinPlan(
    pairs=(PairSpec("x", "y", product),),
    patterns=(PatternPair(Pattern("speed_*"), Pattern("torque_*"), mechanical_power),),
)
ITEMS = [Pair("x", "y", "product"), Pair("speed_*", "torque_*", "mechanical_power")]
QUANTITIES = ["speed_A", "torque_A", "speed_B", "torque_B", "torque_C12", "x", "y", "speed_", "z"]


@st.composite
def arrivals(draw):
    """Records of two things over explicit, pattern and unrelated quantities, in a random
    arrival order (disorder included: some records are late), cut into batches with restore
    points."""
    n = draw(st.integers(0, 120))
    records = [
        (
            draw(st.sampled_from(["R1", "R2"])),
            draw(st.sampled_from(QUANTITIES)),
            draw(st.integers(0, 60)),
            float(draw(st.integers(-50, 50))),
        )
        for _ in range(n)
    ]
    cuts = sorted(set(draw(st.lists(st.integers(0, n), max_size=10))))
    restores = set(draw(st.lists(st.sampled_from(cuts), max_size=4))) if cuts else set()
    return records, cuts, restores


def run(operator: KeyedOperator, records, cuts, restores) -> tuple[Counter, Counter]:
    table = KeyedStates(operator)
    joined: Counter = Counter()
    late: Counter = Counter()
    bounds = [0, *cuts, len(records)]
    for start, end in zip(bounds, bounds[1:], strict=False):
        if start in restores:
            table.restore(table.snapshot())
        part = records[start:end]
        batches = []
        for thing in sorted({r[0] for r in part}):
            mine = [r for r in part if r[0] == thing]
            batches.append(
                (
                    thing,
                    Records.of(
                        [r[1] for r in mine],
                        [r[2] for r in mine],
                        [r[3] for r in mine],
                        [f"{thing}-{k}" for k in range(len(mine))],
                    ),
                )
            )
        for thing, _, step in table.step(batches, 0).emitted:
            columns = step.result.pairs.to_columns(thing, step.config)
            for row in zip(
                columns["left_quantity"],
                columns["right_quantity"],
                columns["left_time"].tolist(),
                columns["right_time"].tolist(),
                [round(r, 6) for r in columns["result"].tolist()],
                columns["result_name"],
                columns["component"],
                strict=True,
            ):
                joined[(thing, *row)] += 1
            names = step.result.late.to_columns(thing, step.config)
            for q, t in zip(names["quantity"], names["time"].tolist(), strict=True):
                late[(thing, q, t)] += 1
    return joined, late


@LSB_SETTINGS
@given(arrivals())
def test_pattern_pairs_join_every_component_exactly_as_the_oracle(case) -> None:
    records, cuts, restores = case
    joined, late = run(JoinOperator(PLAN), records, cuts, restores)
    expected_joined, expected_late = pattern_join(
        [(*r, f"id{k}") for k, r in enumerate(records)], ITEMS
    )
    assert joined == Counter(
        (
            j["thing"],
            j["left_quantity"],
            j["right_quantity"],
            j["left_time_ms"],
            j["right_time_ms"],
            round(j["result"], 6),
            j["result_name"],
            j["component"],
        )
        for j in expected_joined
    )
    assert late == Counter((d["thing"], d["quantity"], d["event_time_ms"]) for d in expected_late)


def test_each_component_is_its_own_series_and_an_explicit_pair_has_none() -> None:
    records = [("R1", q, t, 1.0) for t in (1, 2) for q in ("speed_A", "torque_A", "x", "y")]
    records += [("R1", "speed_B", 3, 2.0), ("R1", "torque_B", 3, 2.0)]
    joined, _ = run(JoinOperator(PLAN), records, [], set())
    components = Counter((key[1], key[7]) for key in joined.elements())
    assert components == {("speed_A", "A"): 2, ("x", ""): 2, ("speed_B", "B"): 1}


def test_a_state_restored_knows_its_components() -> None:
    operator = JoinOperator(PLAN)
    state = operator.initial()
    batch = Records.of(
        ["speed_C7", "torque_C7", "torque_C7"], [5, 6, 7], [1.0, 2.0, 3.0], ["a", "b", "c"]
    )
    state, _ = operator.process(state, batch, 0)
    restored = operator.restore(operator.snapshot(state))
    assert restored.components == ("C7",)
    assert operator.snapshot(restored) == operator.snapshot(state)
    _, step = operator.finish(restored)
    assert set(step.result.pairs.to_columns("R1", step.config)["component"]) == {"C7"}


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (lambda: JoinPlan(), "at least one"),
        (
            lambda: JoinPlan(
                patterns=(
                    PatternPair(Pattern("speed_*"), Pattern("torque_*")),
                    PatternPair(Pattern("spe*"), Pattern("load_*")),
                )
            ),
            "ambiguous",
        ),
        (
            lambda: JoinPlan(
                pairs=(PairSpec("speed_A", "q"),),
                patterns=(PatternPair(Pattern("speed_*"), Pattern("torque_*")),),
            ),
            "list it once",
        ),
    ],
)
def test_a_plan_that_cannot_name_a_records_component_is_refused(plan, message) -> None:
    with pytest.raises(ValueError, match=message):
        plan()


def test_selects_picks_the_records_the_plan_joins() -> None:
    names = np.array(["speed_A", "x", "z", "speed_", "torque_9"], dtype=object)
    assert PLAN.selects(names).tolist() == [True, True, False, False, True]
