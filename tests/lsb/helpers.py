"""Drivers that feed an event list to either path and collect (left, right) time pairs."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from lsb import JoinConfig, JoinState, flush, process_batch, to_bytes
from operators import ms
from tests.lsb.per_record import flush_state, process_record

#: Hypothesis budget for this suite only (never the global profile, which other suites share):
#: moderate by default for 2 shared cores; LSB_HYPOTHESIS_EXAMPLES raises it and
#: LSB_HYPOTHESIS_RANDOM=1 draws new examples instead of the fixed derandomized ones.
LSB_SETTINGS = settings(
    max_examples=int(os.environ.get("LSB_HYPOTHESIS_EXAMPLES", "40")),
    deadline=None,
    derandomize=os.environ.get("LSB_HYPOTHESIS_RANDOM", "") == "",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Event = tuple[str, str, int, float]  # key, quantity, time, value
PairKey = tuple[str, str, int, int]  # key, pair name, left time, right time


@dataclass
class Run:
    pairs: list[PairKey] = field(default_factory=list)
    late: list[tuple[str, str, int, str]] = field(
        default_factory=list
    )  # key, quantity, time, reason
    snapshots: list[bytes] = field(default_factory=list)

    def pair_set(self) -> set[PairKey]:
        return set(self.pairs)

    def duplicates(self) -> list[PairKey]:
        return [p for p, n in Counter(self.pairs).items() if n > 1]


def run_records(
    config: JoinConfig, events: list[Event], restore_at: frozenset[int] = frozenset()
) -> Run:
    """Per-record path; at positions in ``restore_at`` every state goes through bytes."""
    from lsb import from_bytes

    states: dict[str, JoinState] = {}
    out = Run()
    for pos, (key, q, t, v) in enumerate(events):
        if pos in restore_at:
            states = {k: from_bytes(to_bytes(s, config), config) for k, s in states.items()}
        s = states.setdefault(key, JoinState.empty(config))
        r = process_record(config, key, s, q, t, v, pos)
        out.pairs += [
            (p.key, f"{p.left_quantity}~{p.right_quantity}", p.left_time, p.right_time)
            for p in r.pairs
        ]
        out.late += [(x.key, x.quantity, x.time, x.reason) for x in r.late]
    out.snapshots = [to_bytes(states[k], config) for k in sorted(states)]
    for key in sorted(states):
        r = flush_state(config, key, states[key])
        out.pairs += [
            (p.key, f"{p.left_quantity}~{p.right_quantity}", p.left_time, p.right_time)
            for p in r.pairs
        ]
        out.late += [
            (x.key, x.quantity, x.time, x.reason) for x in r.late
        ]  # reorder drain + timeout
    return out


def run_batches(
    config: JoinConfig,
    events: list[Event],
    cuts: set[int] | frozenset[int] = frozenset(),
    serialize: bool = True,
) -> Run:
    """Batch path: the event list cut at ``cuts``; each batch is split per key like Spark does."""
    states: dict[str, JoinState | bytes] = {}
    out = Run()
    bounds = [0] + sorted(c for c in cuts if 0 < c < len(events)) + [len(events)]
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        chunk = events[lo:hi]
        for key in sorted({e[0] for e in chunk}):
            rows = [e for e in chunk if e[0] == key]
            res = process_batch(
                config,
                states.get(key),
                np.array([e[1] for e in rows], dtype=object),
                np.array([e[2] for e in rows], dtype=np.int64),
                np.array([e[3] for e in rows], dtype=np.float64),
            )
            states[key] = res.state_bytes(config) if serialize else res.state
            _collect(out, config, key, res)
    out.snapshots = []
    for k in sorted(states):
        held = states[k]
        out.snapshots.append(held if isinstance(held, bytes) else to_bytes(held, config))
    for key in sorted(states):
        _collect(out, config, key, flush(config, key, states[key]))
    return out


def _collect(out: Run, config: JoinConfig, key: str, res) -> None:
    names = [p.name for p in config.pairs]
    pc = res.pairs
    out.pairs += [
        (key, names[k], a, b)
        for k, a, b in zip(
            pc.pair.tolist(), pc.left_time.tolist(), pc.right_time.tolist(), strict=False
        )
    ]
    out.late += [
        (key, config.quantities[q], t, r)
        for q, t, r in zip(
            res.late.quantity.tolist(),
            res.late.time.tolist(),
            res.late.reason_names(),
            strict=False,
        )
    ]


# --- strategies -------------------------------------------------------------


@st.composite
def stream_times(draw, max_len: int = 200) -> list[int]:
    """Strictly increasing times from a narrow range, so cross-stream ties are common."""
    n = draw(st.integers(1, max_len))
    span = draw(st.sampled_from([n, n + n // 2 + 1, 2 * n + 2, 4 * n + 4]))
    return sorted(draw(st.lists(st.integers(0, span), min_size=n, max_size=n, unique=True)))


@st.composite
def interleaving(draw, streams: list[list[Event]]) -> list[Event]:
    """One arbitrary merge of the given streams that keeps each stream's own order."""
    pos = [0] * len(streams)
    out: list[Event] = []
    live = [i for i, s in enumerate(streams) if s]
    # A few random "bursts" keep drawing cheap even for 1000+ events.
    while live:
        i = live[draw(st.integers(0, len(live) - 1))]
        burst = draw(st.integers(1, 8))
        s = streams[i]
        take = s[pos[i] : pos[i] + burst]
        out += take
        pos[i] += len(take)
        if pos[i] >= len(s):
            live.remove(i)
    return out


def cuts_for(draw, n: int) -> frozenset[int]:
    return frozenset(draw(st.lists(st.integers(0, max(n, 1)), max_size=6)))


def opt_ms(amount: int | None) -> timedelta | None:
    """A drawn policy in milliseconds as the config takes it (None: the policy is off)."""
    return None if amount is None else ms(amount)
