"""The joined pairs' own wait that bench_e2e reports beside the joined latency: from a pair's
later input to the arrival of the record that makes it certain, checked against the join's
brute-force oracle (the first prefix of the feed after which the pair is certain)."""

from __future__ import annotations

import random

import pytest

from benchmarks.support.certainty import certainty_waits
from lsb import PairSpec
from lsb.plan import JoinPlan
from tests.oracles.join import certain_pairs

CONFIG = JoinPlan(pairs=(PairSpec("L", "R"),))
RATE = 1000  # rows/s: row i arrives (and is stamped) at i ms


def rows(present: list[tuple[bool, bool]]) -> list[dict]:
    """One Thing's rows, each holding L, R, both or neither."""
    out = []
    for has_left, has_right in present:
        row: dict = {"Thing": "M1"}
        if has_left:
            row["L"] = 1.0
        if has_right:
            row["R"] = 2.0
        out.append(row)
    return out


def oracle_waits(present: list[tuple[bool, bool]], since_ms: int = 0) -> list[float]:
    """Seconds from each pair's later input to the first prefix after which it is certain."""
    left: list[int] = []
    right: list[int] = []
    seen: set[tuple[int, int]] = set()
    waits = []
    for arrival, (has_left, has_right) in enumerate(present):
        left += [arrival] if has_left else []
        right += [arrival] if has_right else []
        if not left or not right:
            continue
        new = certain_pairs(left, right, left[-1], right[-1]) - seen
        seen |= new
        if arrival >= since_ms:
            waits += [(arrival - max(pair)) / 1000 for pair in new]
    return sorted(waits)


def test_a_prev_pair_waits_for_the_next_record_of_its_earlier_side() -> None:
    # L0 R0 | R1 | R2 | L3: (L0, R1) and (L0, R2) are certain only once L3 shows that no L came
    # between; (L0, R0), (R1, L3) and (R2, L3) as soon as both of their records exist.
    feed = [(True, True), (False, True), (False, True), (True, False)]
    assert sorted(certainty_waits(rows(feed), RATE, CONFIG)) == [0.0, 0.0, 0.0, 0.001, 0.002]
    late = certainty_waits(rows(feed), RATE, CONFIG, since_s=0.003)
    assert sorted(late) == [0.0, 0.0, 0.001, 0.002]


@pytest.mark.parametrize("seed", range(30))
def test_the_waits_match_the_oracle(seed: int) -> None:
    rng = random.Random(seed)
    feed = [(rng.random() < 0.5, rng.random() < 0.5) for _ in range(rng.randint(1, 40))]
    since_ms = rng.choice([0, 10])
    assert sorted(certainty_waits(rows(feed), RATE, CONFIG, since_s=since_ms / 1000)) == (
        oracle_waits(feed, since_ms)
    )
