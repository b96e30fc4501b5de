"""Batch path: one call per key and micro-batch, numpy-vectorized.

This is what :class:`lsb.operator.JoinOperator` (the join the Spark jobs run) calls with the
rows of one key::

    res = process_batch(config, state, quantities, times, values)
    emit(res.pairs); route(res.late); keep(res.state)

It gives exactly the pairs, late records and next state that feeding the same records one by
one through the rules written per arrival gives (``tests/lsb/per_record.py``, the tests' second
way to the pairs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import END_TIME, NO_TIME, JoinConfig
from .kernel import evict_count, new_certain_pairs
from .output import LateColumns, PairColumns
from .policies import (
    INVALID_VALUE,
    PARTNER_TIMEOUT,
    SUPERSEDED,
    Released,
    partner_watermark,
    release_batch,
    timeout_late_mask,
)
from .serde import coerce_state, to_bytes
from .state import JoinState, SideBuffer


@dataclass
class BatchResult:
    pairs: PairColumns
    late: LateColumns
    state: JoinState
    #: Records whose quantity the config does not join (ignored, not late).
    skipped: int

    def state_bytes(self, config: JoinConfig) -> bytes:
        return to_bytes(self.state, config)


def quantity_codes(config: JoinConfig, quantities: object) -> np.ndarray:
    """Map quantity names (or already-coded ints) to config codes, -1 = not joined."""
    q = np.asarray(quantities)
    if q.dtype.kind in "iu":
        codes = q.astype(np.intp)
        codes[(codes < 0) | (codes >= len(config.quantities))] = -1
        return codes
    codes = np.full(len(q), -1, dtype=np.intp)
    for c, name in enumerate(config.quantities):
        codes[q == name] = c
    return codes


def process_batch(
    config: JoinConfig,
    state: JoinState | bytes | None,
    quantities: object,
    times: object,
    values: object,
    *,
    end_of_stream: bool = False,
    resting: bool = False,
) -> BatchResult:
    """Join one batch of records of one key, in arrival order.

    ``quantities``: names (str array) or codes into ``config.quantities``;
    ``times``: int64 event times (ms); ``values``: float64.  With
    ``end_of_stream`` the reorder stage is drained, every remaining pair is
    emitted and the returned state is empty; with ``resting`` as well (an idle
    flush, :func:`rest`) the state keeps each pair's last records instead.  The
    input ``state`` object is updated in place when it is a JoinState.
    """
    end_of_stream = end_of_stream or resting
    st = coerce_state(state, config)
    codes = quantity_codes(config, quantities)
    t = np.ascontiguousarray(times, dtype=np.int64)
    v = np.ascontiguousarray(values, dtype=np.float64)
    if not (len(codes) == len(t) == len(v)):
        raise ValueError("quantities, times and values must have the same length")
    known = codes >= 0
    finite = np.isfinite(v)
    candidates = np.flatnonzero(known & finite)
    last_before = [qs.last for qs in st.quantities]
    released, rejected, superseded = release_batch(
        config, st, codes, t, v, candidates, end_of_stream
    )
    late_parts = [_late(idx, codes, t, v, reason, -1) for idx, reason in rejected]
    if superseded:
        code, time, value = (np.array(column) for column in zip(*superseded, strict=False))
        n = len(code)
        late_parts.append(
            LateColumns(
                np.full(n, -1, np.int64),
                code.astype(np.int16),
                time.astype(np.int64),
                value.astype(np.float64),
                np.full(n, SUPERSEDED, np.int8),
                np.full(n, -1, np.int16),
            )
        )
    bad = np.flatnonzero(known & ~finite)
    if len(bad):
        late_parts.append(_late(bad, codes, t, v, INVALID_VALUE, -1))
    last_after = [qs.last for qs in st.quantities]
    pair_parts = []
    for k, (a, b) in enumerate(config.pair_codes()):
        pc, lc = _join_pair(
            config, st, k, a, b, released, last_before, last_after, end_of_stream, resting
        )
        pair_parts.append(pc)
        if lc is not None:
            late_parts.append(lc)
    if resting:
        _raise_lasts(config, st)
    elif end_of_stream:
        st = JoinState.empty(config)
    late = _concat_late(late_parts)
    return BatchResult(PairColumns.concat(pair_parts), late, st, int((~known).sum()))


def flush(config: JoinConfig, key: str, state: JoinState | bytes | None) -> BatchResult:
    """End of stream for one key: every pair still pending is now certain."""
    empty = np.empty(0)
    return process_batch(config, state, np.empty(0, np.intp), empty, empty, end_of_stream=True)


def rest(config: JoinConfig, state: JoinState | bytes | None) -> BatchResult:
    """An idle flush: every pair still pending is emitted as if the streams had ended, and the
    join goes on. Each pair keeps the records later ones can still pair with (a record whose
    next partner has not come yet), and each stream that has records now refuses anything not
    newer than its partners' newest record: such a record could change a pair already emitted
    (docs/join.md)."""
    empty = np.empty(0)
    return process_batch(config, state, np.empty(0, np.intp), empty, empty, resting=True)


def _raise_lasts(config: JoinConfig, st: JoinState) -> None:
    """After an idle flush: each stream with records takes its partners' newest time as its
    own last, so a record at or before it is late (it could move a prev or next emitted)."""
    bound = [qs.last for qs in st.quantities]
    for a, b in config.pair_codes():
        last_a, last_b = st.quantities[a].last, st.quantities[b].last
        if last_a != NO_TIME:
            bound[a] = max(bound[a], last_b)
        if last_b != NO_TIME:
            bound[b] = max(bound[b], last_a)
    for qs, last in zip(st.quantities, bound, strict=True):
        qs.last = last
        qs.max_seen = max(qs.max_seen, last)


def _late(
    idx: np.ndarray, codes: np.ndarray, t: np.ndarray, v: np.ndarray, reason: int, pair: int
) -> LateColumns:
    n = len(idx)
    return LateColumns(
        idx.astype(np.int64),
        codes[idx].astype(np.int16),
        t[idx],
        v[idx],
        np.full(n, reason, np.int8),
        np.full(n, pair, np.int16),
    )


def _concat_late(parts: list[LateColumns]) -> LateColumns:
    parts = [p for p in parts if len(p)]
    if not parts:
        return LateColumns.empty()
    fields = ("index", "quantity", "time", "value", "reason", "pair")
    out = LateColumns(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields))
    order = np.argsort(out.index, kind="stable")
    return LateColumns(*(getattr(out, f)[order] for f in fields))


def _side_arrays(side: SideBuffer) -> tuple[np.ndarray, np.ndarray]:
    return np.array(side.times, dtype=np.int64), np.array(side.values, dtype=np.float64)


def _join_pair(
    config: JoinConfig,
    st: JoinState,
    k: int,
    a: int,
    b: int,
    rel: Released,
    last_before: list[int],
    last_after: list[int],
    end_of_stream: bool,
    resting: bool = False,
) -> tuple[PairColumns, LateColumns | None]:
    ps = st.pairs[k]
    T = config.partner_timeout_ms
    sel = np.flatnonzero((rel.quantity == a) | (rel.quantity == b))
    is_a = rel.quantity[sel] == a
    rt = rel.time[sel]
    late_cols = None
    if T is not None and len(sel):
        late_a = timeout_late_mask(is_a, rt, last_before[b], T)
        late_b = timeout_late_mask(~is_a, rt, last_before[a], T)
        dropped = late_a | late_b
        if dropped.any():
            d = sel[dropped]
            n = len(d)
            late_cols = LateColumns(
                rel.source[d],
                rel.quantity[d].astype(np.int16),
                rel.time[d],
                rel.value[d],
                np.full(n, PARTNER_TIMEOUT, np.int8),
                np.full(n, k, np.int16),
            )
            keep = ~dropped
            sel, is_a = sel[keep], is_a[keep]
    new_a, new_b = sel[is_a], sel[~is_a]
    old_ta, old_va = _side_arrays(ps.left)
    old_tb, old_vb = _side_arrays(ps.right)
    ta = np.concatenate((old_ta, rel.time[new_a]))
    va = np.concatenate((old_va, rel.value[new_a]))
    tb = np.concatenate((old_tb, rel.time[new_b]))
    vb = np.concatenate((old_vb, rel.value[new_b]))
    last_a_old = ps.left.last
    last_b_old = ps.right.last
    last_a = int(ta[-1]) if len(ta) else NO_TIME
    last_b = int(tb[-1]) if len(tb) else NO_TIME
    # A stream's watermark is never below its own last accepted time: always so, but after an
    # idle flush (rest) that time was raised past its buffer, and the pairs emitted then must
    # not come back as certain again when the watermark moves on.
    wa_old = max(last_a_old, partner_watermark(last_before[b], T), last_before[a])
    wb_old = max(last_b_old, partner_watermark(last_before[a], T), last_before[b])
    wa_live = max(last_a, partner_watermark(last_after[b], T), last_after[a])
    wb_live = max(last_b, partner_watermark(last_after[a], T), last_after[b])
    wa_new, wb_new = (END_TIME, END_TIME) if end_of_stream else (wa_live, wb_live)
    i, j = new_certain_pairs(ta, len(old_ta), tb, len(old_tb), wa_old, wa_new, wb_old, wb_new)
    pair_ta, pair_tb = ta[i], tb[j]
    if config.max_gap_ms is not None and len(i):
        ok = np.abs(pair_ta - pair_tb) <= config.max_gap_ms
        i, j, pair_ta, pair_tb = i[ok], j[ok], pair_ta[ok], pair_tb[ok]
    pair_va, pair_vb = va[i], vb[j]
    ev = np.maximum(pair_ta, pair_tb)
    if len(i) > 1:
        order = np.lexsort((pair_tb, pair_ta, ev))
        pair_ta, pair_tb, pair_va, pair_vb, ev = (
            pair_ta[order],
            pair_tb[order],
            pair_va[order],
            pair_vb[order],
            ev[order],
        )
    spec = config.pairs[k]
    with np.errstate(all="ignore"):
        result = (
            np.asarray(spec.result(pair_va, pair_vb), dtype=np.float64) if len(i) else np.empty(0)
        )
    if resting or not end_of_stream:  # a rest keeps what later records still pair with
        ca = evict_count(ta, last_b, wb_live, config.max_gap_ms)
        cb = evict_count(tb, last_a, wa_live, config.max_gap_ms)
        ps.left = SideBuffer(ta[ca:].tolist(), va[ca:].tolist())
        ps.right = SideBuffer(tb[cb:].tolist(), vb[cb:].tolist())
    cols = PairColumns(
        np.full(len(ev), k, np.int16), pair_ta, pair_va, pair_tb, pair_vb, result, ev
    )
    return cols, late_cols
