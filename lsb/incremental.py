"""Per-record join step: emit exactly the pairs that become certain.

A pair (u, v) with u.t <= v.t from different streams U, V belongs to the
result iff v = next(u) (no V record in [u.t, v.t)) or u = prev(v) (no U record
in (u.t, v.t]).  The first condition is fixed the moment both records exist;
the second is fixed once U's watermark w_U (its last accepted time, or a
partner-timeout watermark) reaches v.t.  So a pair is *certain* iff
``v = next(u)`` or ``(u = prev(v) and w_U >= v.t)``.  Certainty is monotone,
so emitting ``certain(after) - certain(before)`` at every step emits each pair
exactly once and as early as possible; no set of emitted pairs is remembered.
The rules below enumerate that difference for one arrival or one watermark
advance, touching only the few records next to the new one.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from .config import NO_TIME
from .state import SideBuffer

#: (own time, own value, other time, other value); the caller orients it.
RawPair = tuple[int, float, int, float]


def insert(
    own: SideBuffer, other: SideBuffer, t: int, v: float, w_own_old: int, w_other: int
) -> list[RawPair]:
    """Append record (t, v) to ``own`` (t > w_own_old) and return the new certain pairs.

    ``w_own_old`` is own's watermark before the arrival, ``w_other`` the
    partner's watermark (>= its last time).
    """
    tp, tq, vq = own.times, other.times, other.values
    out: list[RawPair] = []
    n = len(tq)
    lp_old = tp[-1] if tp else NO_TIME
    k = bisect_left(tq, t)
    # next(p): the first partner record at or after t (a tie included).
    if k < n:
        out.append((t, v, tq[k], vq[k]))
    # Partner records y in (lp_old, t): p is their next record.
    lo = bisect_right(tq, lp_old) if tp else 0
    for y in range(lo, k):
        out.append((t, v, tq[y], vq[y]))
    # prev(p) strictly before t, certain once the partner's watermark reaches t;
    # skipped when the loop above already emitted it.
    tie = k < n and tq[k] == t
    j = k - 1
    if not tie and j >= 0 and j < lo and w_other >= t:
        out.append((t, v, tq[j], vq[j]))
    # Own watermark moves from w_own_old to t: pairs (pp, y) with y in
    # (w_own_old, t) become certain, except y = next(pp), emitted long ago.
    if tp:
        pp_t, pp_v = tp[-1], own.values[-1]
        first_after_pp = bisect_left(tq, pp_t)
        for y in range(bisect_right(tq, w_own_old), k):
            if y != first_after_pp:
                out.append((pp_t, pp_v, tq[y], vq[y]))
    tp.append(t)
    own.values.append(v)
    return out


def advance(moving: SideBuffer, other: SideBuffer, w_old: int, w_new: int) -> list[RawPair]:
    """``moving``'s watermark goes from w_old to w_new without a record (timeout, end).

    Pairs (u, x) with u = prev(x) = moving's last record and x.t in (w_old,
    w_new] become certain unless x = next(u) already made them so.  Returned
    oriented as (moving time, value, other time, value).
    """
    if w_new <= w_old or not moving.times or not other.times:
        return []
    ut, uv = moving.times[-1], moving.values[-1]
    tx, vx = other.times, other.values
    first_after_u = bisect_left(tx, ut)
    out: list[RawPair] = []
    for x in range(bisect_right(tx, w_old), bisect_right(tx, w_new)):
        if x != first_after_u:
            out.append((ut, uv, tx[x], vx[x]))
    return out


def evict(side: SideBuffer, other_last: int, other_w: int, max_gap: int | None = None) -> None:
    """Drop head records that can take part in no further (emitted) pair.

    A head x goes once its successor x' satisfies other_w >= x'.t (every future
    partner record lies after x', so x is nobody's prev) and either its next
    record is known (other_last >= x.t) or, with a max gap, every future
    partner is too far away (x.t + max_gap < other_w): a silent partner then
    does not make the buffer grow without bound.
    """
    ts = side.times
    if len(ts) < 2:
        return
    has_successor = min(bisect_right(ts, other_w) - 1, len(ts) - 1)
    c = min(has_successor, bisect_right(ts, other_last))
    if max_gap is not None and other_w != NO_TIME:
        c = max(c, min(has_successor, bisect_left(ts, other_w - max_gap)))
    if c > 0:
        del ts[:c]
        del side.values[:c]
