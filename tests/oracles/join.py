"""Brute-force reference for the join, written straight from the definition.

Quadratic on purpose: it shares no code or idea with the library beyond the
definition, so agreeing with it means something.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple


def oracle_pairs(
    left: list[int], right: list[int], max_gap: int | None = None
) -> set[tuple[int, int]]:
    """The set {(x, prev(x)), (x, next(x))} as (left time, right time) tuples."""
    out: set[tuple[int, int]] = set()
    for a in left:
        before = [b for b in right if b <= a]
        after = [b for b in right if b >= a]
        if before:
            out.add((a, max(before)))
        if after:
            out.add((a, min(after)))
    for b in right:
        before = [a for a in left if a <= b]
        after = [a for a in left if a >= b]
        if before:
            out.add((max(before), b))
        if after:
            out.add((min(after), b))
    if max_gap is not None:
        out = {(a, b) for a, b in out if abs(a - b) <= max_gap}
    return out


def certain_pairs(
    left: list[int], right: list[int], w_left: int, w_right: int
) -> set[tuple[int, int]]:
    """Pairs that are in the result whatever records arrive later.

    A later record of a stream is newer than that stream's watermark.  The
    pairs that survive both "nothing more arrives" and "a record arrives at
    every integer time after each watermark" are exactly the certain ones: a
    pair that can still be lost is lost in the dense continuation.
    """
    now = oracle_pairs(left, right)
    everything = left + right
    if not everything:
        return set()
    top = max(everything + [w_left, w_right]) + 2
    # Records below every existing one cannot remove a pair; starting there keeps the lists small.
    floor = min(everything) - 1
    dense_l = left + list(range(max(w_left, (left or [w_left])[-1], floor) + 1, top))
    dense_r = right + list(range(max(w_right, (right or [w_right])[-1], floor) + 1, top))
    return now & oracle_pairs(dense_l, dense_r)


# The pipeline's join, from the definitions above and the default late policy (docs/join.md):
# per Thing and pair, over the records each stream accepted, the pairs certain so far.

#: The result functions the join offers, from their definitions (docs/join.md).
RESULTS: dict[str, Callable[[float, float], float]] = {
    "mechanical_power": lambda speed_rpm, torque_nm: 2.0 * math.pi / 60.0 * speed_rpm * torque_nm,
    "product": lambda left, right: left * right,
    "difference": lambda left, right: left - right,
}


class Pair(NamedTuple):
    left: str
    right: str
    result_name: str = "mechanical_power"


def parse_pairs(text: str) -> list[Pair]:
    """``left:right[:result]`` separated by commas, as JOIN_PAIRS is written."""
    return [Pair(*item.strip().split(":")) for item in text.split(",") if item.strip()]


def accepted_and_late(
    records: Iterable[tuple[str, str, int, float, str]], quantities: set[str]
) -> tuple[dict[tuple[str, str], list[tuple[int, float]]], list[dict]]:
    """Default late policy: in arrival order, a record not newer than the last one its (thing,
    quantity) stream accepted is late. Quantities no pair uses are not the join's business."""
    accepted: dict[tuple[str, str], list[tuple[int, float]]] = {}
    late = []
    for thing, quantity, t, value, row_id in records:
        if quantity not in quantities:
            continue
        stream = accepted.setdefault((thing, quantity), [])
        if stream and t <= stream[-1][0]:
            late.append(
                {
                    "thing": thing,
                    "quantity": quantity,
                    "event_time_ms": t,
                    "value": value,
                    "row_id": row_id,
                    "reason": "behind_watermark",
                    "stage": "join",
                    "watermark_ms": None,
                }
            )
        else:
            stream.append((t, value))
    return accepted, late


def prev_index(times: list[int], t: int) -> int | None:
    """Index of the latest time <= t."""
    i = bisect.bisect_right(times, t) - 1
    return i if i >= 0 else None


def next_index(times: list[int], t: int) -> int | None:
    """Index of the earliest time >= t."""
    i = bisect.bisect_left(times, t)
    return i if i < len(times) else None


def certain_by(x_t: int, partner_t: int, other_watermark: int) -> bool:
    """Whether ``partner`` (a record of the other stream, prev or next of x) stays x's prev/next
    whatever arrives later. A later record of the other stream is newer than its watermark (its
    last accepted record), so it can fall between them only if x is newer than that watermark
    and strictly after the partner (a next partner is at or before the watermark already)."""
    return not (partner_t < x_t and x_t > other_watermark)


def stream_pairs(
    left: list[tuple[int, float]], right: list[tuple[int, float]]
) -> set[tuple[int, int]]:
    """{(x, prev(x)), (x, next(x))} of both streams, as (left time, right time), each kept only if
    one of its reasons to be in the result can no longer be undone."""
    lt, rt = [t for t, _ in left], [t for t, _ in right]
    certain: set[tuple[int, int]] = set()
    for own, other, flip in ((lt, rt, False), (rt, lt, True)):
        watermark = other[-1] if other else None
        for t in own:
            for index in (prev_index(other, t), next_index(other, t)):
                if index is None:
                    continue
                u = other[index]
                if watermark is not None and certain_by(t, u, watermark):
                    certain.add((u, t) if flip else (t, u))
    return certain


def stream_join(
    records: Iterable[tuple[str, str, int, float, str]],
    pairs: list[Pair],
    max_gap_ms: int | None = None,
) -> tuple[list[dict], list[dict]]:
    """The joined records (Avro ``JoinedPair`` fields but the id) and the late records the join
    stage writes, for records in arrival order (thing, quantity, time, value, row id)."""
    accepted, late = accepted_and_late(records, {q for pair in pairs for q in pair[:2]})
    joined = []
    for thing in dict.fromkeys(thing for thing, _ in accepted):
        for pair in pairs:
            left, right = (
                accepted.get((thing, pair.left), []),
                accepted.get((thing, pair.right), []),
            )
            values_l, values_r = dict(left), dict(right)
            for lt, rt in sorted(stream_pairs(left, right)):
                if max_gap_ms is not None and abs(lt - rt) > max_gap_ms:
                    continue
                lv, rv = values_l[lt], values_r[rt]
                joined.append(
                    {
                        "thing": thing,
                        "left_quantity": pair.left,
                        "right_quantity": pair.right,
                        "left_time_ms": lt,
                        "right_time_ms": rt,
                        "left_value": lv,
                        "right_value": rv,
                        "result_name": pair.result_name,
                        "result": RESULTS[pair.result_name](lv, rv),
                        "event_time_ms": max(lt, rt),
                    }
                )
    return joined, late


def component_in(pattern: str, quantity: str) -> str | None:
    """What the one ``*`` of ``pattern`` stands for in ``quantity`` (at least one character),
    from the definition in docs/join.md; None when it does not match."""
    head, tail = pattern.split("*")
    middle = quantity[len(head) : len(quantity) - len(tail)]
    if quantity.startswith(head) and quantity.endswith(tail) and len(middle) >= 1:
        if head + middle + tail == quantity:
            return middle
    return None


def pairs_of_thing(items: list[Pair], quantities: Iterable[str]) -> list[tuple[Pair, str]]:
    """(concrete pair, component) a thing's quantities make of JOIN_PAIRS items: an explicit
    item as it is (component ""), a pattern item once per component either of its patterns
    finds in the names."""
    names = set(quantities)
    out: list[tuple[Pair, str]] = []
    for item in items:
        if "*" not in item.left:
            out.append((item, ""))
            continue
        found = {
            c
            for q in names
            for c in (component_in(item.left, q), component_in(item.right, q))
            if c is not None
        }
        for c in sorted(found):
            left, right = item.left.replace("*", c), item.right.replace("*", c)
            out.append((Pair(left, right, item.result_name), c))
    return out


def pattern_join(
    records: Sequence[tuple[str, str, int, float, str]],
    items: list[Pair],
    max_gap_ms: int | None = None,
) -> tuple[list[dict], list[dict]]:
    """:func:`stream_join` with JOIN_PAIRS items that may be patterns: per thing, the pairs its
    own quantities make (:func:`pairs_of_thing`); each joined record names its component."""
    joined: list[dict] = []
    late: list[dict] = []
    for thing in dict.fromkeys(r[0] for r in records):
        mine = [r for r in records if r[0] == thing]
        found = pairs_of_thing(items, (r[1] for r in mine))
        component = {(p.left, p.right): c for p, c in found}
        pairs = [p for p, _ in found]
        if not pairs:
            continue
        some, handed = stream_join(mine, pairs, max_gap_ms)
        joined += [
            {**j, "component": component[(j["left_quantity"], j["right_quantity"])]} for j in some
        ]
        late += handed
    return joined, late
