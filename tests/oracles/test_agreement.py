"""The oracles and the production code, written apart, agree on random input: the oracle is
independent (it imports nothing of the project: tests/test_layering.py) and right about the
same things the code is. A disagreement is a bug on one side, to be found and fixed, never
smoothed over here."""

from __future__ import annotations

import json
import math
from collections import Counter
from decimal import Decimal

import numpy as np
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from lsb import JoinConfig, PairSpec, process_batch
from lsb.results import RESULT_FUNCTIONS
from streamkit.events import RowError, parse_row
from tests.lsb.helpers import opt_ms
from tests.oracles.join import Pair, certain_pairs, stream_join, stream_pairs
from tests.oracles.rows import decode, spec_row

EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Timestamps of every form the rule covers: each magnitude, negative, fractional, as digit
#: strings and ISO-8601 with and without an offset.
timestamps = st.one_of(
    st.integers(-(10**11), 10**19),
    st.sampled_from(
        [0, 10**11 - 1, 10**11, 10**14 - 1, 10**14, 10**17 - 1, 10**17, -(10**11), -(10**14)]
    ),
    st.decimals(
        min_value=-(10**12), max_value=10**18, places=3, allow_nan=False, allow_infinity=False
    ),
    st.integers(0, 10**18).map(str),
    st.datetimes().map(lambda d: d.isoformat()),  # naive: no time of it is imaginary
    st.datetimes(timezones=st.timezones()).map(lambda d: d.isoformat()),
    st.sampled_from(["", "abc", None, True, "1e3", "١٢٣"]),
)
names = st.one_of(
    st.sampled_from(["actSpeed_C11", "vaTorque_C11", "a|b", "", " ", "x\n", "é", "Temp 1"]),
    st.text(max_size=12),
)
numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**400), 10**400),
    st.sampled_from([True, "1.5", None]),
)


def json_text(obj: dict) -> str:
    """A row as a user's file holds it: Decimals written as their digits, not as floats."""

    def default(value: object) -> object:
        raise TypeError(value)

    text = (
        json.dumps(
            {
                k: (float(v) if k != "Timestamp" and hasattr(v, "as_tuple") else v)
                for k, v in obj.items()
            },
            default=default,
            allow_nan=True,
        )
        if not any(hasattr(v, "as_tuple") for v in obj.values())
        else "{"
        + ", ".join(
            f"{json.dumps(k)}: {v if hasattr(v, 'as_tuple') else json.dumps(v)}"
            for k, v in obj.items()
        )
        + "}"
    )
    return text


@st.composite
def rows(draw) -> dict:
    obj = {
        "Thing": draw(st.one_of(st.sampled_from(["R0815", "Thing 1"]), st.text(max_size=8))),
        "Timestamp": draw(timestamps),
    }
    if draw(st.booleans()):
        obj["id"] = draw(st.one_of(st.text(max_size=8), st.integers()))
    for _ in range(draw(st.integers(0, 3))):
        obj[draw(names)] = draw(numbers)
    return obj


@EXAMPLES
@given(rows())
@example({"Thing": "R0815", "Timestamp": 1554096380468, "actSpeed_C11": 1.5})
@example({"Thing": "R0815", "Timestamp": Decimal("543635725.874"), "actSpeed_C11": 1.5})
def test_the_row_oracle_and_the_parser_agree(obj: dict) -> None:
    """Accepted or refused alike, and an accepted row read the same: thing, time (ms), id and
    every quantity."""
    try:
        text = json_text(obj)
    except (TypeError, ValueError):
        assume(False)
    decoded = decode(text)
    want = spec_row(decoded) if decoded is not None else None
    try:
        got = parse_row(text)
    except RowError:
        got = None
    if want is None or got is None:
        assert want is None and got is None, (text, want, got)
        return
    assert (got.thing, got.timestamp_ms, got.row_id) == (want.thing, want.time_ms, want.row_id), (
        text
    )
    assert list(got.quantities.items()) == list(want.quantities), text


stream = st.lists(st.integers(0, 40), max_size=25)


@EXAMPLES
@given(stream.map(sorted).map(lambda xs: sorted(set(xs))), stream.map(lambda xs: sorted(set(xs))))
def test_the_certain_pairs_agree_with_the_dense_continuation(
    left: list[int], right: list[int]
) -> None:
    """Two oracles of "certain": the reasons that cannot be undone, and the pairs that survive
    a record at every later time of each stream."""
    values = lambda times: [(t, float(t)) for t in times]  # noqa: E731
    want = certain_pairs(left, right, left[-1] if left else -1, right[-1] if right else -1)
    assert stream_pairs(values(left), values(right)) == want


@st.composite
def arrivals(draw) -> tuple[list[tuple], list[int]]:
    """Records of two things and three quantities in a random arrival order (late ones and
    re-sent copies among them), and batch cuts."""
    records = []
    for thing in ("R0815", "H31415"):
        for quantity in ("actSpeed_C11", "vaTorque_C11", "vaLoad_C11"):
            for t in draw(st.lists(st.integers(0, 60), max_size=20)):
                records.append(
                    (thing, quantity, t, float(draw(st.integers(-50, 50))) / 4, f"row{t}")
                )
    order = draw(st.permutations(records))
    cuts = draw(st.lists(st.integers(1, 8), max_size=10))
    return list(order), cuts


def production(
    records: list[tuple], cuts: list[int], pairs: tuple[PairSpec, ...], gap: int | None
) -> tuple[Counter, Counter]:
    """What the join job writes (its batch path, per thing in arrival order, cut into batches),
    in the oracle's shape."""
    config = JoinConfig(pairs=pairs, max_gap=opt_ms(gap))
    joined: Counter = Counter()
    late: Counter = Counter()
    for thing in ("R0815", "H31415"):
        mine = [r for r in records if r[0] == thing and config.quantity_code(r[1]) >= 0]
        state, start, sizes = None, 0, iter(cuts)
        while start < len(mine):
            batch = mine[start : start + next(sizes, len(mine))]
            start += len(batch)
            res = process_batch(
                config,
                state,
                np.array([r[1] for r in batch], dtype=object),
                np.array([r[2] for r in batch], np.int64),
                np.array([r[3] for r in batch]),
            )
            state = res.state
            columns = res.pairs.to_columns(thing, config)
            names = [config.pairs[p].result_name for p in res.pairs.pair]
            joined.update(
                zip(
                    [thing] * len(res.pairs),
                    columns["left_quantity"],
                    columns["right_quantity"],
                    columns["left_time"].tolist(),
                    columns["right_time"].tolist(),
                    columns["left_value"].tolist(),
                    columns["right_value"].tolist(),
                    names,
                    np.round(columns["result"], 9).tolist(),
                    strict=True,
                )
            )
            lates = res.late.to_columns(thing, config)
            late.update(
                zip(
                    [thing] * len(res.late),
                    lates["quantity"],
                    lates["time"].tolist(),
                    lates["value"].tolist(),
                    lates["reason"],
                    strict=True,
                )
            )
    return joined, late


@EXAMPLES
@given(arrivals(), st.sampled_from([None, 0, 5]))
def test_the_join_oracle_and_the_join_agree(
    arrival: tuple[list[tuple], list[int]], gap: int | None
) -> None:
    """Pairs with their values and results, and late records, for any arrival order and cuts."""
    records, cuts = arrival
    specs = (
        PairSpec(
            "actSpeed_C11", "vaTorque_C11", RESULT_FUNCTIONS["mechanical_power"], "mechanical_power"
        ),
        PairSpec("vaLoad_C11", "vaTorque_C11", RESULT_FUNCTIONS["difference"], "difference"),
    )
    want_joined, want_late = stream_join(
        records, [Pair(s.left, s.right, s.result_name) for s in specs], gap
    )
    got_joined, got_late = production(records, cuts, specs, gap)
    assert got_joined == Counter(
        (
            r["thing"],
            r["left_quantity"],
            r["right_quantity"],
            r["left_time_ms"],
            r["right_time_ms"],
            r["left_value"],
            r["right_value"],
            r["result_name"],
            round(r["result"], 9),
        )
        for r in want_joined
    )
    assert got_late == Counter(
        (r["thing"], r["quantity"], r["event_time_ms"], r["value"], r["reason"]) for r in want_late
    )
    assert all(math.isfinite(r["result"]) for r in want_joined)
