"""The joined pairs' own wait on a feed: how long a pair waits for the data alone before it is
certain. No pipeline can remove that part of the joined latency, so the benchmarks print it
beside the latency they measure."""

from __future__ import annotations

from collections.abc import Iterable

from benchmarks.support.spark_run import PAIRS
from lsb.plan import JoinPlan
from simulator.generate import generate


def inherent_waits(rate: float, things: int, rows: int) -> list[float]:
    """:func:`certainty_waits` of the generated feed (``things`` Things) and the benchmarks'
    pair."""
    from spark_jobs.config import JoinSettings
    from spark_jobs.join import join_plan

    return certainty_waits(
        generate(rows, things, seed=7), rate, join_plan(JoinSettings(pairs=PAIRS))
    )


def certainty_waits(
    rows: Iterable[dict], rate: float, plan: JoinPlan, since_s: float = 0.0
) -> list[float]:
    """Seconds each pair waits for the data alone: from its event time (its later input: both
    inputs exist) to the arrival of the record that makes it certain (docs/join.md), with every
    record processed at once on arrival (the rows arriving at ``rate``, stamped on arrival like
    the simulator's --live). The floor under any system's joined latency on this feed; pairs
    made certain before ``since_s`` (a warm-up) are left out."""
    from lsb import LocalStreamBuffer

    rows = list(rows)
    config = plan.config(plan.components_of({name for obj in rows for name in obj}))
    buffer = LocalStreamBuffer(config)
    quantities = sorted(config.quantities)
    since_ms = since_s * 1000
    waits: list[float] = []
    for index, obj in enumerate(rows):
        arrival_ms = int(index * 1000 / rate)
        for quantity in quantities:
            if quantity in obj:
                step = buffer.push(obj["Thing"], quantity, arrival_ms, obj[quantity])
                if arrival_ms >= since_ms:
                    waits.extend((arrival_ms - int(t)) / 1000 for t in step.pairs.event_time)
    return waits
