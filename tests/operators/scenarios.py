"""Small fixed scenarios for the operators: their golden snapshots and the property tests."""

from __future__ import annotations

from datetime import timedelta

from lsb import JoinConfig, JoinOperator, PairSpec
from lsb.results import mechanical_power
from operators import ByQuantity, Records, Together, ms
from opstats import Catalogue, OperationStatistics, Pattern, PowerInputs, Rating, StatsConfig
from windowing import WindowOperator, WindowRules, WindowSpec

NOW_MS = 1_700_000_000_000


def join_operator(idle_ms: int = 0) -> JoinOperator:
    """The golden files' join has no idle flush (older versions had none to hold)."""
    config = JoinConfig(
        pairs=(PairSpec("speed", "torque"),), allowed_disorder=ms(3), partner_timeout=ms(50)
    )
    return JoinOperator(config, max_future=timedelta(hours=1), idle_timeout=ms(idle_ms))


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


def opstats_operator() -> OperationStatistics:
    """A rating of 1 W, so that the contract test's small values reach every band."""
    config = StatsConfig(
        PowerInputs(Pattern("speed_*"), Pattern("torque_*"), mechanical_power),
        Catalogue(default=Rating(0.001, physical_bound=5.0, defaulted=True)),
        cycle=ms(20),
        max_hold=ms(5),
        partner_timeout=ms(10),
        idle_timeout=ms(1000),
    )
    return OperationStatistics(config, max_future=timedelta(hours=1))


#: A thing's records in arrival order: two joined streams with disorder, a re-send, a copy
#: with another value, a quantity that is only windowed, a non-ASCII row id.
RECORDS = Records.of(
    ["speed", "torque", "speed", "temp", "torque", "speed", "speed", "temp", "torque", "speed"],
    [1, 2, 6, 3, 9, 4, 6, 12, 30, 33],
    [1.0, 2.5, 3.0, 20.0, -1.0, 0.5, 3.5, 21.0, 2.0, float("inf")],
    ["s1", "t2", "s6", "c3", "t9", "s4", "s6", "c12\u00e9", "t30", "s33"],
)

#: Two components' inputs: a pending record, a held value, an open cycle and a copy handed back.
STATS_RECORDS = Records.of(
    ["speed_C1", "torque_C1", "speed_C1", "torque_C1", "speed_C1", "torque_C2", "speed_C1"]
    + ["torque_C1", "speed_C2", "torque_C1", "speed_C1"],
    [1, 1, 4, 6, 4, 7, 21, 21, 9, 24, 23],
    [2.0, 3.0, -2.0, 1.5, -2.0, 1.0, 1.0, 2.0, 0.5, 0.5, 3.0],
    ["a", "b", "c", "d", "c", "e", "f", "g", "h\u00e9", "i", "j"],
)
