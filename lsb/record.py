"""Per-record path: one record in, the pairs it makes certain out.

For sources that deliver records one at a time (a Kafka consumer loop, a test
replaying an interleaving).  Same state type and same results as the batch
path in ``batch.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .config import END_TIME, JoinConfig
from .incremental import RawPair, advance, evict, insert
from .output import JoinedPair, LateRecord
from .policies import (
    INVALID_VALUE,
    PARTNER_TIMEOUT,
    REASONS,
    SUPERSEDED,
    drain,
    partner_watermark,
    release_record,
)
from .results import event_time
from .state import JoinState


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
