#!/usr/bin/env python
"""What the operation statistics add to the single pass's per-thing work (a script, not a test).

    .venv/bin/python benchmarks/bench_opstats.py [--things 20] [--rows 3000] [--components 3]
        [--batches 2000,50000] [--repeat 3] [--seed 5]

Generates machines with several components (a row per second with jitter, gaps of minutes now
and then; per row each component's speed and torque and a load reading, some rows without a
speed), and runs the same records, cut into batches of the given sizes, through the driver's
table of thing states (``operators.keyed.KeyedStates``) twice:

* baseline - the single pass's operator: the join of every component's speed and torque and
  10 s tumbling windows of every quantity,
* opstats  - the same with the operation statistics as a third part,

printing CPU microseconds per raw record of each, the ratio and the cycles emitted (best of
``--repeat`` runs by wall time). It measures the operators alone: decoding, rendering and
producing the outputs are the same for both and are not in it.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from functools import partial

import numpy as np

from benchmarks.support.timing import best_of, status
from lsb import JoinConfig, JoinOperator, PairSpec
from lsb.results import mechanical_power
from operators import ByQuantity, Records, Together
from operators.keyed import KeyedStates
from opstats import OperationStatistics, Pattern, PowerInputs, StatsConfig
from windowing import WindowOperator, WindowRules, parse_windows

START_MS = 1_554_096_380_468


def generate(things: int, rows: int, components: int, seed: int) -> list[tuple[str, Records]]:
    """Every thing's records in arrival order, one Records per thing."""
    rng = np.random.default_rng(seed)
    out = []
    names = [f"C{11 + k}" for k in range(components)]
    for thing in range(things):
        steps = rng.choice([990, 1000, 1000, 1010, 250], rows)
        steps[rng.random(rows) < 0.002] = 300_000  # the machine off for 5 minutes
        times = START_MS + np.cumsum(steps)
        quantity, time, value = [], [], []
        for t in times.tolist():
            for c in names:
                if rng.random() > 0.1:  # the speed only when it changed
                    quantity.append(f"actSpeed_{c}")
                    time.append(t)
                    value.append(float(rng.normal(1500, 600)))
                quantity += [f"vaTorque_{c}", f"vaLoad_{c}"]
                time += [t, t]
                value += [float(rng.normal(60, 30)), float(rng.random())]
        ids = [f"{thing}-{k}" for k in range(len(time))]
        out.append((f"M{thing:03d}", Records.of(quantity, time, value, ids)))
    return out


def operator(components: int, stats: bool) -> Together:
    names = [f"C{11 + k}" for k in range(components)]
    join = JoinOperator(
        JoinConfig(tuple(PairSpec(f"actSpeed_{c}", f"vaTorque_{c}") for c in names)),
        max_future=timedelta(hours=1),
    )
    rules = WindowRules(
        tuple(parse_windows("10s", "", "")), timedelta(seconds=10), timedelta(hours=1)
    )
    parts: list = [
        ("join", join, join.config.quantities),
        ("aggregate", ByQuantity(WindowOperator(rules, timedelta(minutes=5))), None),
    ]
    if stats:
        inputs = PowerInputs(Pattern("actSpeed_*"), Pattern("vaTorque_*"), mechanical_power)
        config = StatsConfig(inputs, idle_timeout=timedelta(minutes=5))
        parts.append(("opstats", OperationStatistics(config, max_future=timedelta(hours=1)), None))
    return Together(*parts)


def run(data: list[tuple[str, Records]], components: int, stats: bool, batch: int) -> int:
    """Every thing's records in batches of about ``batch`` records in all; the cycles emitted."""
    table = KeyedStates(operator(components, stats))
    per_thing = max(1, batch // len(data))
    longest = max(len(records) for _, records in data)
    cycles, now = 0, START_MS
    for at in range(0, longest, per_thing):
        now += 1000
        step = table.step(
            [(thing, r.take(slice(at, at + per_thing))) for thing, r in data if at < len(r)], now
        )
        for _, _, emitted in step.emitted:
            cycles += sum(len(out.cycles) for name, _, out in emitted if name == "opstats")
    return cycles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--things", type=int, default=20)
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--components", type=int, default=3)
    parser.add_argument("--batches", default="2000,50000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    status("generating")
    data = generate(args.things, args.rows, args.components, args.seed)
    records = sum(len(r) for _, r in data)
    print(
        f"{args.things} things x {args.rows} rows x {args.components} components: "
        f"{records:,} raw records"
    )
    print(f"{'batch':>8} {'baseline us/rec':>16} {'opstats us/rec':>15} {'ratio':>7} {'cycles':>7}")
    for batch in (int(b) for b in args.batches.split(",")):
        cpu = {}
        for stats in (False, True):
            label = f"{'opstats' if stats else 'baseline'} {batch}"
            cycles, _, cpu[stats] = best_of(
                partial(run, data, args.components, stats, batch), args.repeat, label
            )
        base_us, stats_us = (cpu[s] / records * 1e6 for s in (False, True))
        print(
            f"{batch:>8} {base_us:>16.2f} {stats_us:>15.2f} {stats_us / base_us:>7.2f} {cycles:>7}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
