"""Small fixed scenarios for the operators: their golden snapshots and the property tests."""

from __future__ import annotations

from datetime import timedelta

from lsb import JoinConfig, JoinOperator, PairSpec
from operators import ByQuantity, Records, Together, ms
from windowing import WindowOperator, WindowRules, WindowSpec

NOW_MS = 1_700_000_000_000


def join_operator() -> JoinOperator:
    config = JoinConfig(
        pairs=(PairSpec("speed", "torque"),), allowed_disorder_ms=3, partner_timeout_ms=50
    )
    return JoinOperator(config, max_future_ms=3_600_000)


def window_operator() -> WindowOperator:
    rules = WindowRules(
        (WindowSpec.tumbling(ms(10)), WindowSpec.sliding(ms(20), ms(5)), WindowSpec.session(ms(7))),
        allowed_lateness=ms(5),
        max_future=timedelta(hours=1),
    )
    return WindowOperator(rules, idle_timeout=ms(1000))


def thing_operator() -> Together:
    """As the single pass composes them."""
    join = join_operator()
    return Together(
        ("join", join, join.config.quantities), ("aggregate", ByQuantity(window_operator()), None)
    )


#: A thing's records in arrival order: two joined streams with disorder, a re-send, a copy
#: with another value, a quantity that is only windowed, a non-ASCII row id.
RECORDS = Records.of(
    ["speed", "torque", "speed", "temp", "torque", "speed", "speed", "temp", "torque", "speed"],
    [1, 2, 6, 3, 9, 4, 6, 12, 30, 33],
    [1.0, 2.5, 3.0, 20.0, -1.0, 0.5, 3.5, 21.0, 2.0, float("inf")],
    ["s1", "t2", "s6", "c3", "t9", "s4", "s6", "c12\u00e9", "t30", "s33"],
)
