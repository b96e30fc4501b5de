"""What the whole pipeline must write for a file of events, computed offline from the
specification alone: the raw topic's records, the joined pairs, the windows and the late
records of both stages, each as the fields of its Avro record. Nothing of the project is
imported (tests/test_layering.py checks it), so a bug in a service cannot hide in its oracle.

The raw topic's records are a function of the file (its distinct records); the joined pairs,
the windows and the late records are a function of what the raw topic holds in arrival order,
which the checker reads back and hands in: a re-sent row is there twice, and the stages see it
twice; after a Mosquitto crash a Thing's rows may be there in another order than published, and
the join hands the overtaken ones back as late.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from tests.oracles import opstats
from tests.oracles.join import Pair, parse_pairs, pattern_join
from tests.oracles.rows import Measurement, SpecRow, measurements
from tests.oracles.windows import Spec, window_oracle


@dataclass(frozen=True)
class PipelineSpec:
    """The stages' options the oracle needs: the pairs joined and the windows made."""

    pairs: tuple[Pair, ...] = ()
    max_gap_ms: int | None = None
    windows: tuple[Spec, ...] = ()
    lateness_ms: int = 0
    #: the operation statistics (None: not computed)
    stats: opstats.Definition | None = None


@dataclass
class Outputs:
    """Every output topic's records (Avro fields), one dict per record, duplicates included."""

    raw: list[dict] = field(default_factory=list)
    joined: list[dict] = field(default_factory=list)
    aggregates: list[dict] = field(default_factory=list)
    late: list[dict] = field(default_factory=list)
    #: the certain cycles: {(thing, component, cycle start): figures} (oracles/opstats.py)
    opstats: dict = field(default_factory=dict)


def raw_record(m: Measurement) -> dict:
    return {
        "thing": m.thing,
        "quantity": m.quantity,
        "event_time_ms": m.time_ms,
        "value": m.value,
        "row_id": m.row_id,
    }


def expected_outputs(
    spec: PipelineSpec,
    file_records: list[Measurement],
    arrival: Iterable[Measurement] | None = None,
) -> Outputs:
    """``file_records``: the file's distinct records in replay order; ``arrival``: the raw
    topic's records in offset order (defaults to the file's: a run without re-sends). Every
    stage's output is a function of the raw topic as the stages read it: re-sent copies behind
    their originals, and, after a Mosquitto crash, a Thing's records in another order than
    published (docs/exactly-once.md, what is not guaranteed)."""
    arrived = list(file_records if arrival is None else arrival)
    joined, join_late = pattern_join(arrived, list(spec.pairs), spec.max_gap_ms)
    out = Outputs(raw=[raw_record(m) for m in file_records], joined=joined if spec.pairs else [])
    if spec.pairs:
        out.late += join_late
    if spec.windows:
        windows = window_oracle(arrived, list(spec.windows), spec.lateness_ms)
        out.aggregates = windows.aggregate_records()
        out.late += windows.late_records
    if spec.stats is not None:
        records = [(m.thing, m.quantity, m.time_ms, m.value, m.row_id) for m in arrived]
        out.opstats, handed = opstats.certain(records, spec.stats)
        out.late += [
            {
                "thing": thing,
                "quantity": quantity,
                "event_time_ms": t,
                "value": value,
                "row_id": row_id,
                "reason": reason,
                "stage": "opstats",
                "watermark_ms": None,
            }
            for thing, quantity, t, value, row_id, reason in handed
        ]
    return out


def default_stats() -> opstats.Definition:
    """The single pass's default statistics (docs/operation-statistics.md): actSpeed_* with
    vaTorque_*, mechanical power, every component rated 20 kW in five bands, a bound of 10x,
    cycles of 10 minutes, a hold of 60 s, a partner timeout of 5 minutes."""
    return opstats.Definition(
        ("actSpeed_", ""),
        ("vaTorque_", ""),
        lambda n, m: 2.0 * math.pi / 60.0 * n * m,
        lambda thing, component: (20_000.0, (0.0, 20.0, 40.0, 60.0, 80.0, 100.0), 10.0),
        600_000,
        60_000,
        300_000,
    )


# The shapes the job tests compare in: records as (thing, quantity, time, value), pairs as
# (thing, left quantity, right quantity, left time, right time).


def distinct_records(rows: list[SpecRow]) -> list[tuple[str, str, int, float]]:
    """The raw topic's distinct records of the rows, in order (first copy of each)."""
    return [(m.thing, m.quantity, m.time_ms, m.value) for m in measurements(rows)]


def join_pairs(options: Any, fed: Iterable[tuple[str, str, int, float]]) -> tuple[Counter, int]:
    """The pairs certain after ``fed`` (arrival order; no end of stream: a stream never ends) and
    the number of late records, for a join configured by ``options`` (anything with the
    ``JOIN_*`` settings' attributes). The oracle knows the default late policy only."""
    if getattr(options, "allowed_disorder", None) or getattr(options, "partner_timeout", None):
        raise NotImplementedError(
            "the oracle models the default late policy (no reorder stage, no partner timeout)"
        )
    max_gap = getattr(options, "max_gap", None)
    gap = max_gap // timedelta(milliseconds=1) if max_gap else None
    joined, late = pattern_join([(*r, "") for r in fed], parse_pairs(options.pairs), gap)
    return Counter(
        (r["thing"], r["left_quantity"], r["right_quantity"], r["left_time_ms"], r["right_time_ms"])
        for r in joined
    ), len(late)
