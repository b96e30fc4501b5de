"""The join's idle flush: a thing that falls silent has its pending pairs emitted after the idle
timeout, and goes on exactly when it resumes. Against an oracle written from the rule in
docs/join.md: a flush happens only if the thing had records since the last one; then each
stream that has records takes its partner streams' last accepted time (a flush may have raised
it) as its own, a later record at or before it is late, and the pairs emitted over the whole
run are every (x, prev(x)) and (x, next(x)) of the accepted records, each once."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from lsb import JoinConfig, JoinOperator, PairSpec
from lsb.results import product
from operators import Records, due, ms
from tests.oracles.join import oracle_pairs

from .helpers import LSB_SETTINGS

PAIRS = (("speed", "torque"), ("speed", "load"))
CONFIG = JoinConfig(pairs=tuple(PairSpec(a, b, product) for a, b in PAIRS))
IDLE_MS = 1_000
NOW_MS = 1_700_000_000_000
FLUSH = ("flush", 0)

event = st.one_of(
    st.tuples(st.sampled_from(["speed", "torque", "load", "other"]), st.integers(0, 40)),
    st.just(FLUSH),
)


def oracle(events: list[tuple[str, int]]) -> tuple[Counter, Counter]:
    last: dict[str, int] = {}
    accepted: dict[str, list[int]] = {}
    late: Counter = Counter()
    armed = False  # records came since the last flush: the timer is set
    for quantity, t in events:
        if (quantity, t) == FLUSH:
            if not armed:
                continue
            armed = False
            raised = dict(last)
            for a, b in PAIRS:
                if a in last and b in last:
                    raised[a] = max(raised[a], last[b])
                    raised[b] = max(raised[b], last[a])
            last = raised
            continue
        armed = True
        if quantity == "other":
            continue
        if quantity in last and t <= last[quantity]:
            late[(quantity, t)] += 1
        else:
            last[quantity] = t
            accepted.setdefault(quantity, []).append(t)
    pairs: Counter = Counter()
    for a, b in PAIRS:
        for lt, rt in oracle_pairs(accepted.get(a, []), accepted.get(b, [])):
            pairs[(a, b, lt, rt)] += 1
    return pairs, late


def run(events: list[tuple[str, int]], batch: int) -> tuple[Counter, Counter]:
    operator = JoinOperator(CONFIG, idle_timeout=ms(IDLE_MS))
    state, now = operator.initial(), NOW_MS
    pairs: Counter = Counter()
    late: Counter = Counter()

    def collect(step) -> None:
        if step is None:
            return
        columns = step.result.pairs.to_columns("T", step.config)
        for row in zip(
            columns["left_quantity"],
            columns["right_quantity"],
            columns["left_time"].tolist(),
            columns["right_time"].tolist(),
            strict=True,
        ):
            pairs[row] += 1
        handed = step.result.late.to_columns("T", step.config)
        for q, t in zip(handed["quantity"], handed["time"].tolist(), strict=True):
            late[(q, t)] += 1

    pending: list[tuple[str, int]] = []

    def send() -> None:
        nonlocal state, now
        if pending:
            now += 1
            records = Records.of(
                [q for q, _ in pending],
                [t for _, t in pending],
                [1.0] * len(pending),
                [""] * len(pending),
            )
            state, step = operator.process(state, records, now)
            collect(step)
            pending.clear()

    for item in events:
        if item == FLUSH:
            send()
            now += IDLE_MS
            if due(operator.deadline(state), now):
                state, step = operator.on_timer(state, now)
                collect(step)
            continue
        pending.append(item)
        if len(pending) >= batch:
            send()
    send()
    _, step = operator.finish(operator.restore(operator.snapshot(state)))
    collect(step)
    return pairs, late


@LSB_SETTINGS
@given(st.lists(event, max_size=60), st.integers(1, 6))
def test_idle_flushes_emit_each_pair_once_and_later_records_behind_them_are_late(
    events, batch
) -> None:
    assert run(events, batch) == oracle(events)


def emitted(step) -> set[tuple[int, int]]:
    pairs = step.result.pairs
    return set(zip(pairs.left_time.tolist(), pairs.right_time.tolist(), strict=True))


def test_a_silent_things_last_pair_comes_with_the_flush_and_a_record_behind_it_is_late() -> None:
    operator = JoinOperator(JoinConfig.single("speed", "torque"), idle_timeout=ms(IDLE_MS))
    batch = Records.of(
        ["speed", "torque", "speed", "speed"], [1, 5, 6, 10], [1.0, 2.0, 3.0, 4.0], list("abcd")
    )
    state, step = operator.process(operator.initial(), batch, NOW_MS)
    assert emitted(step) == {(1, 5), (6, 5)}
    # (10, 5) waits: prev(10) is 5 only while no torque comes before 10
    assert operator.deadline(state) == NOW_MS + IDLE_MS
    assert operator.on_timer(state, NOW_MS + 3 * IDLE_MS)[1] is None  # nothing ran: re-armed
    deadline = operator.deadline(state)
    assert deadline is not None
    state, flushed = operator.on_timer(state, deadline)
    assert flushed is not None and operator.deadline(state) is None
    assert emitted(flushed) == {(10, 5)}
    behind = Records.of(["torque", "torque"], [8, 12], [1.0, 1.0], ["e", "f"])
    state, step = operator.process(state, behind, NOW_MS + 5 * IDLE_MS)
    assert step.result.late.time.tolist() == [8]
    assert emitted(step) == {(6, 12), (10, 12)}  # 12 is the next torque of speed 6 and 10
