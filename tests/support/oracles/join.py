"""Brute-force reference for the join, written straight from the definition.

Quadratic on purpose: it shares no code or idea with the library beyond the
definition, so agreeing with it means something.
"""

from __future__ import annotations


def oracle_pairs(left: list[int], right: list[int], max_gap: int | None = None) -> set[tuple[int, int]]:
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


def certain_pairs(left: list[int], right: list[int], w_left: int, w_right: int) -> set[tuple[int, int]]:
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
