"""Late, reorder and partner-timeout policies.

All three look only at event times and at the order records arrive in, never
at the wall clock, so a replay of the same input gives the same output.

* Behind the watermark (default): a record not newer than the last accepted record of its
  own (key, quantity) stream is handed back instead of joined.
* Reorder stage (``allowed_disorder_ms = D > 0``): records wait in a per-stream
  heap until the stream's own watermark (newest time seen - D) passes them and
  are then released in time order; only records behind the last released one
  are late.  D = 0 is exactly the default policy.  A record with the time of
  one still held is another copy of it: the last copy wins (as in Kafka
  compaction), an identical one is a duplicate, a changed one replaces the
  held copy, which is handed back as superseded.
* Partner timeout (``partner_timeout_ms = T``): a side's watermark is
  ``max(its last time, partner's last time - T)``; a record at or behind it is
  late *for that pair*.  That is what makes the pending prev-pairs of the
  advanced stream certain while its partner is silent.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from operators import reasons

from .config import NO_TIME, JoinConfig
from .state import JoinState, QuantityState

# Reasons a record is handed back instead of joined: codes in arrays, their names (one
# vocabulary with the windows: operators.reasons) in outputs.
BEHIND_WATERMARK = 0
DUPLICATE = 1
PARTNER_TIMEOUT = 2
INVALID_VALUE = 3
SUPERSEDED = 4
REASONS: tuple[str, ...] = (
    reasons.BEHIND_WATERMARK,
    reasons.DUPLICATE,
    reasons.PARTNER_TIMEOUT,
    reasons.INVALID_VALUE,
    reasons.SUPERSEDED,
)


def partner_watermark(partner_last: int, timeout: int | None) -> int:
    """The watermark a side inherits from its partner under the timeout policy."""
    if timeout is None or partner_last == NO_TIME:
        return NO_TIME
    return partner_last - timeout


@dataclass
class Released:
    """Records that passed the own-stream policy, in release order.

    ``source`` is the record's index in the current batch (-1 when it came
    from the reorder stage of an earlier batch).
    """

    quantity: np.ndarray  # intp codes
    time: np.ndarray  # int64
    value: np.ndarray  # float64
    source: np.ndarray  # int64


def release_record(
    qs: QuantityState, t: int, v: float, disorder: int
) -> tuple[list[tuple[int, float]], int, float | None]:
    """Per-record own-stream policy: (released records, -1, value of the held copy this record
    superseded or None) or ([], reason code, None)."""
    if t <= qs.last:
        return [], BEHIND_WATERMARK, None
    if disorder <= 0:
        qs.last = t
        qs.max_seen = t if t > qs.max_seen else qs.max_seen
        return [(t, v)], -1, None
    held = qs.held
    same = next((k for k, h in enumerate(held) if h[0] == t), -1)
    if same >= 0:
        old = held[same][1]
        if old == v:
            return [], DUPLICATE, None
        held[same] = (t, v)  # times are unique among held records: the heap order stands
        return [], -1, old
    heapq.heappush(held, (t, v))
    if t > qs.max_seen:
        qs.max_seen = t
    horizon = qs.max_seen - disorder
    out: list[tuple[int, float]] = []
    while held and held[0][0] <= horizon:
        out.append(heapq.heappop(held))
    if out:
        qs.last = out[-1][0]
    return out, -1, None


def drain(qs: QuantityState) -> list[tuple[int, float]]:
    """End of stream: everything still held in the reorder stage, in time order."""
    out = sorted(qs.held)
    qs.held = []
    if out:
        qs.last = out[-1][0]
    return out


def release_batch(
    config: JoinConfig,
    state: JoinState,
    codes: np.ndarray,
    times: np.ndarray,
    values: np.ndarray,
    candidates: np.ndarray,
    end_of_stream: bool,
) -> tuple[Released, list[tuple[np.ndarray, int]], list[tuple[int, int, float]]]:
    """Own-stream policy for a batch; same decisions as :func:`release_record` per record.

    ``candidates`` are the batch indices worth considering (known quantity,
    finite value).  Returns the released records, (indices, reason) groups
    of rejected ones, and the superseded held copies as (quantity code, time,
    value): no batch index, since the copy may have come in an earlier batch.
    """
    rejected: list[tuple[np.ndarray, int]] = []
    superseded: list[tuple[int, int, float]] = []
    if config.allowed_disorder_ms <= 0:
        # Vectorized: a record is accepted iff it is newer than everything of
        # its stream before it (late records never raise that maximum).
        parts = []
        for c, qs in enumerate(state.quantities):
            idx = candidates[codes[candidates] == c]
            if len(idx) == 0:
                continue
            tq = times[idx]
            prior = np.maximum.accumulate(np.concatenate(([qs.last], tq[:-1])))
            ok = tq > prior
            if not ok.all():
                rejected.append((idx[~ok], BEHIND_WATERMARK))
            acc = idx[ok]
            if len(acc):
                qs.last = int(times[acc[-1]])
                qs.max_seen = qs.last
            parts.append(acc)
        src = np.sort(np.concatenate(parts)) if parts else np.empty(0, dtype=np.int64)
        rel = Released(codes[src], times[src], values[src], src.astype(np.int64))
        return rel, rejected, superseded
    # With a reorder stage, release order depends on every earlier record of the
    # stream; a plain loop keeps it obviously identical to the per-record path.
    q_out: list[int] = []
    t_out: list[int] = []
    v_out: list[float] = []
    s_out: list[int] = []
    late_idx: dict[int, list[int]] = {BEHIND_WATERMARK: [], DUPLICATE: []}
    disorder = config.allowed_disorder_ms
    tl = times.tolist()
    vl = values.tolist()
    cl = codes.tolist()
    # Times are unique per stream among held records, so time -> batch index
    # recovers where a record released later in this batch came from.
    origin: list[dict[int, int]] = [{} for _ in state.quantities]
    for i in candidates.tolist():
        c = cl[i]
        out, reason, replaced = release_record(state.quantities[c], tl[i], vl[i], disorder)
        if reason >= 0:
            late_idx[reason].append(i)
            continue
        if replaced is not None:
            superseded.append((c, tl[i], replaced))
        origin[c][tl[i]] = i
        for t, v in out:
            q_out.append(c)
            t_out.append(t)
            v_out.append(v)
            s_out.append(origin[c].pop(t, -1))
    if end_of_stream:
        for c, qs in enumerate(state.quantities):
            for t, v in drain(qs):
                q_out.append(c)
                t_out.append(t)
                v_out.append(v)
                s_out.append(origin[c].pop(t, -1))
    for reason, idx in late_idx.items():
        if idx:
            rejected.append((np.asarray(idx, dtype=np.int64), reason))
    rel = Released(
        np.asarray(q_out, dtype=np.intp),
        np.asarray(t_out, dtype=np.int64),
        np.asarray(v_out, dtype=np.float64),
        np.asarray(s_out, dtype=np.int64),
    )
    return rel, rejected, superseded


def timeout_late_mask(
    is_own: np.ndarray, times: np.ndarray, partner_last_before: int, timeout: int
) -> np.ndarray:
    """For records of one pair in release order: which own-side ones the partner timed out.

    A record is late for the pair if it is at or behind (partner's newest
    released time before it) - timeout.
    """
    partner_t = np.where(is_own, NO_TIME, times)
    seen = np.maximum.accumulate(np.concatenate(([partner_last_before], partner_t[:-1])))
    threshold = np.maximum(seen, NO_TIME + timeout) - timeout
    return is_own & (times <= threshold)
