#!/usr/bin/env python
"""Benchmark of the event-time windows' ``process`` for one key (a script, not a test).

    .venv/bin/python benchmarks/bench_windows.py [--records 200000] [--batches 1000,50000]
        [--duplicates 0.01] [--tumbling 10s] [--sliding ''] [--sessions ''] [--lateness-ms 10000]
        [--by-row-id] [--seed 7] [--repeat 3]

Generates one key's records in arrival order (about 1 s apart with jitter, 0.2 % stepping
back up to a minute so the late rule has work, unique row ids), and a copy of that input in
which a share of the records (``--duplicates``) are re-sends of a record up to 20 back, half
identical, half with another value. For each input and batch size it prints records/s of

* reference - ``process_reference``: every record classified one by one in arrival order,
* process   - ``process`` as the aggregate job runs it,

and the ratio, best of ``--repeat`` runs each, with CPU seconds next to wall seconds (the
machine may be shared). The Steps of both paths are compared (windows, set-aside and
superseded records, state bytes) and the script exits 1 if they differ.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial

import numpy as np

from benchmarks.support.timing import best_of, status
from operators import ms
from windowing import (
    Step,
    WindowRules,
    WindowState,
    parse_windows,
    process,
    process_reference,
    to_bytes,
)

START_MS = 1_554_096_380_468
Input = tuple[np.ndarray, np.ndarray, list[str]]


def generate(records: int, seed: int) -> Input:
    """One key's records; the same seed gives the same records."""
    rng = np.random.default_rng(seed)
    times = START_MS + np.cumsum(rng.choice([997, 1000, 1000, 1003, 2000], records)).astype(
        np.int64
    )
    back = rng.random(records) < 0.002
    times[back] -= rng.integers(1000, 60_000, int(back.sum()))
    values = np.round(rng.normal(50.0, 10.0, records), 3)
    row_ids = [f"{x:032x}" for x in rng.integers(0, 2**63 - 1, records).tolist()]
    return times, values, row_ids


def with_copies(data: Input, share: float, seed: int) -> Input:
    """``share`` of the records replaced by a re-send of one up to 20 back: half identical
    (a duplicate), half with another value (it supersedes the held copy)."""
    times, values, row_ids = data[0].copy(), data[1].copy(), list(data[2])
    rng = np.random.default_rng(seed + 1)
    at = np.flatnonzero(rng.random(len(times)) < share)
    for i, back, changed in zip(
        at.tolist(),
        rng.integers(1, 21, len(at)).tolist(),
        (rng.random(len(at)) < 0.5),
        strict=True,
    ):
        j = max(i - back, 0)
        times[i], row_ids[i] = times[j], row_ids[j]
        values[i] = values[j] + 1.0 if changed else values[j]
    return times, values, row_ids


Processor = Callable[..., Step]


def run(fn: Processor, rules: WindowRules, data: Input, batch: int) -> list[Step]:
    """Every batch through ``fn``, the state carried."""
    times, values, row_ids = data
    now_ms = int(times.max())
    state, steps = WindowState(), []
    for lo in range(0, len(times), batch):
        steps.append(
            fn(
                rules,
                state,
                times[lo : lo + batch],
                values[lo : lo + batch],
                row_ids[lo : lo + batch],
                now_ms,
            )
        )
        state = steps[-1].state
    return steps


def exactly(steps: list[Step]) -> list[str]:
    """Each Step as an exact string: repr of a float round-trips, numpy scalars show their type."""
    return [
        repr((step.windows, step.aside, step.superseded, to_bytes(step.state))) for step in steps
    ]


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument(
        "--batches", default="1000,50000", help="records per process call, comma separated"
    )
    ap.add_argument(
        "--duplicates",
        type=float,
        default=0.01,
        help="share of re-sent records in the second input",
    )
    ap.add_argument("--tumbling", default="10s")
    ap.add_argument("--sliding", default="")
    ap.add_argument("--sessions", default="")
    ap.add_argument("--lateness-ms", type=int, default=10_000)
    ap.add_argument(
        "--by-row-id",
        action="store_true",
        help="the same record: (event time, row id), as joined input",
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs per measurement; the fastest counts"
    )
    args = ap.parse_args()
    rules = WindowRules(
        tuple(parse_windows(args.tumbling, args.sliding, args.sessions)),
        ms(args.lateness_ms),
        max_future=ms(3_600_000),
        same_by_row_id=args.by_row_id,
    )
    status(f"generating {args.records:,} records")
    plain = generate(args.records, args.seed)
    inputs = {
        "no copies": plain,
        f"{args.duplicates:.0%} copies": with_copies(plain, args.duplicates, args.seed),
    }
    print(
        f"\n{args.records:,} records of one key; windows "
        f"{', '.join(s.label for s in rules.specs)}; lateness {args.lateness_ms} ms; same record "
        f"by {'(time, row id)' if args.by_row_id else 'time'}; best of {args.repeat}"
    )
    print(
        f"{'input':<12}{'batch':>8}{'path':>11}{'wall s':>9}{'records/s':>12}{'cpu s':>8}"
        f"{'rec/cpu-s':>12}{'x ref':>8}{'same':>6}"
    )
    same_everywhere = True
    for name, data in inputs.items():
        for batch in (int(b) for b in args.batches.split(",")):
            ref, ref_s, ref_cpu = best_of(
                partial(run, process_reference, rules, data, batch),
                args.repeat,
                f"{name} {batch} reference",
            )
            new, new_s, new_cpu = best_of(
                partial(run, process, rules, data, batch), args.repeat, f"{name} {batch} process"
            )
            same = exactly(ref) == exactly(new)
            same_everywhere &= same
            n = len(data[0])
            for path, secs, cpu in (("reference", ref_s, ref_cpu), ("process", new_s, new_cpu)):
                print(
                    f"{name:<12}{batch:>8,}{path:>11}{secs:>9.3f}{n / secs:>12,.0f}"
                    f"{cpu:>8.3f}{n / cpu:>12,.0f}"
                    f"{ref_s / secs:>8.2f}{'yes' if same else 'NO':>6}"
                )
    return 0 if same_everywhere else 1


if __name__ == "__main__":
    sys.exit(main())
