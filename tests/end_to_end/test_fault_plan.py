"""The client fault plan (tests/support/faults) exercises what the client-faults test checks
for whatever the seed, so that test cannot fail by an unlucky draw."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.faults import INFLUX_WRITE, KAFKA_CALLS, NEVER_FORCED, FaultPlan


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), scale=st.sampled_from([0.0, 0.1, 1.0]))
def test_the_first_two_kinds_of_every_call_fail_within_forty_calls(seed: int, scale: float) -> None:
    plan = FaultPlan(seed, scale)
    for call, table in {**KAFKA_CALLS, "influx_write": INFLUX_WRITE}.items():
        if call in NEVER_FORCED:
            continue
        kinds = [kind for kind in (plan.draw(call, table) for _ in range(40)) if kind]
        assert kinds[:2] == list(table[1] * 2)[:2], (call, kinds)  # a call with one kind: it twice


def test_a_delivery_is_never_forced_to_fail() -> None:
    """A failed delivery ends the bridge (by design): forced into every run, it would restart
    the bridge in a loop, making no progress."""
    plan = FaultPlan(3, 0.0)
    assert not any(plan.draw("delivery", KAFKA_CALLS["delivery"]) for _ in range(1000))


def test_without_forced_calls_the_rate_rules() -> None:
    plan = FaultPlan(7, 1.0)
    faults = sum(plan.draw("commit", KAFKA_CALLS["commit"]) is not None for _ in range(20_000))
    assert 0.09 * 20_000 < faults < 0.11 * 20_000 + 2
