"""The join one record at a time: the second, independent way to the pairs the batch path
(``lsb.batch``) computes, kept here to test it against (``tests/lsb``). It shares only the state
type and the own-stream policy with the package; the rules that decide which pairs became
certain are written out per arrival instead of vectorized per batch.

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

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

from lsb.config import END_TIME, NO_TIME, JoinConfig
from lsb.output import JoinedPair, LateRecord
from lsb.policies import (
    INVALID_VALUE,
    PARTNER_TIMEOUT,
    REASONS,
    SUPERSEDED,
    drain,
    partner_watermark,
    release_record,
)
from lsb.results import event_time
from lsb.state import JoinState, SideBuffer

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


@dataclass
class StepResult:
    pairs: list[JoinedPair] = field(default_factory=list)
    late: list[LateRecord] = field(default_factory=list)


def process_record(
    config: JoinConfig,
    key: str,
    state: JoinState,
    quantity: str,
    time: int,
    value: float,
    index: int = -1,
) -> StepResult:
    """Feed one record; ``state`` is updated in place.  Unknown quantities are ignored.

    ``index`` is only echoed in late records so a caller can find the input again.
    """
    res = StepResult()
    code = config.quantity_code(quantity)
    if code < 0:
        return res
    if not math.isfinite(value):
        res.late.append(LateRecord(key, quantity, time, value, REASONS[INVALID_VALUE], None, index))
        return res
    qs = state.quantities[code]
    before = qs.last
    released, reason, replaced = release_record(qs, time, value, config.allowed_disorder_ms)
    if reason >= 0:
        res.late.append(LateRecord(key, quantity, time, value, REASONS[reason], None, index))
        return res
    if replaced is not None:
        res.late.append(LateRecord(key, quantity, time, replaced, REASONS[SUPERSEDED], None, -1))
    for t, v in released:
        _join_released(config, key, state, code, t, v, before, index if t == time else -1, res)
        before = t
    return res


def flush_state(config: JoinConfig, key: str, state: JoinState) -> StepResult:
    """End of stream: drain the reorder stages, emit every pending pair, empty the state."""
    res = StepResult()
    for code, qs in enumerate(state.quantities):
        before = qs.last
        for t, v in drain(qs):
            _join_released(config, key, state, code, t, v, before, -1, res)
            before = t
    T = config.partner_timeout_ms
    for k, (a, b) in enumerate(config.pair_codes()):
        ps = state.pairs[k]
        wa = max(ps.left.last, partner_watermark(state.quantities[b].last, T))
        wb = max(ps.right.last, partner_watermark(state.quantities[a].last, T))
        _emit(res, config, key, k, advance(ps.left, ps.right, wa, END_TIME), own_is_left=True)
        _emit(res, config, key, k, advance(ps.right, ps.left, wb, END_TIME), own_is_left=False)
    fresh = JoinState.empty(config)
    state.quantities, state.pairs = fresh.quantities, fresh.pairs
    return res


def _join_released(
    config: JoinConfig,
    key: str,
    state: JoinState,
    code: int,
    t: int,
    v: float,
    own_last_before: int,
    index: int,
    res: StepResult,
) -> None:
    """Offer one record that passed its own stream's policy to every pair using it."""
    T = config.partner_timeout_ms
    for k, (a, b) in enumerate(config.pair_codes()):
        if code != a and code != b:
            continue
        ps = state.pairs[k]
        own_is_left = code == a
        own, other = (ps.left, ps.right) if own_is_left else (ps.right, ps.left)
        partner_last = state.quantities[b if own_is_left else a].last
        w_own_old = max(own.last, partner_watermark(partner_last, T))
        w_other_old = max(other.last, partner_watermark(own_last_before, T))
        w_other_new = max(other.last, partner_watermark(t, T))
        if T is not None and t <= w_own_old:
            res.late.append(
                LateRecord(
                    key,
                    config.quantities[code],
                    t,
                    v,
                    REASONS[PARTNER_TIMEOUT],
                    config.pairs[k].name,
                    index,
                )
            )
        else:
            _emit(
                res, config, key, k, insert(own, other, t, v, w_own_old, w_other_old), own_is_left
            )
        if w_other_new > w_other_old:
            # This record also moved the partner's timeout watermark.
            _emit(
                res, config, key, k, advance(other, own, w_other_old, w_other_new), not own_is_left
            )
        w_own_new = max(own.last, partner_watermark(partner_last, T))
        evict(own, other.last, w_other_new, config.max_gap_ms)
        evict(other, own.last, w_own_new, config.max_gap_ms)


def _emit(
    res: StepResult, config: JoinConfig, key: str, k: int, raw: list[RawPair], own_is_left: bool
) -> None:
    spec = config.pairs[k]
    gap = config.max_gap_ms
    for ot, ov, xt, xv in raw:
        if own_is_left:
            lt, lv, rt, rv = ot, ov, xt, xv
        else:
            lt, lv, rt, rv = xt, xv, ot, ov
        if gap is not None and abs(lt - rt) > gap:
            continue
        res.pairs.append(
            JoinedPair(
                key,
                spec.left,
                spec.right,
                lt,
                lv,
                rt,
                rv,
                float(spec.result(lv, rv)),
                event_time(lt, rt),
            )
        )
