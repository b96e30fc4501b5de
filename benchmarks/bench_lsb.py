#!/usr/bin/env python
"""Benchmark of the LocalStreamBuffer join (a script, not a test).

    .venv/bin/python benchmarks/bench_lsb.py [--rows 400000] [--seed 7] [--keep DIR]

Generates a deterministic synthetic events file (events.json style, ~55 % of
rows with speed, ~95 % with torque, a few backward time steps so the late
policy has work), then prints joins/s for

* baseline   - straightforward pure Python: json.loads + sort + bisect + json.dumps,
* cli        - ``python -m lsb`` end to end in a subprocess (start-up,
               parsing, joining and writing included),
* batch      - ``process_batch`` on ready numpy arrays (one call per key and batch),

with ratios to the baseline, all in one process run on the same data.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from bisect import bisect_left, bisect_right
from pathlib import Path

import numpy as np

from benchmarks.support.timing import best_of, status
from lsb import JoinConfig, process_batch
from lsb.results import mechanical_power

ROOT = Path(__file__).resolve().parents[1]

SPEED, TORQUE = "actSpeed_C11", "vaTorque_C11"
KEYS = ("R0815", "H31415", "R27182", "M4711")


def generate(path: Path, rows: int, seed: int) -> None:
    """Synthetic events file; the same seed gives the same bytes."""
    rng = random.Random(seed)
    clock = {k: 1_554_096_380_468 + 17 * i for i, k in enumerate(KEYS)}
    with path.open("w") as f:
        for n in range(rows):
            key = KEYS[rng.randrange(len(KEYS))]
            clock[key] += rng.choice((997, 1000, 1000, 1003, 2000))
            ts = clock[key]
            if rng.random() < 0.002:  # a backward step: this row's records are late
                ts -= rng.randrange(1000, 60_000)
            row: dict = {"Thing": key, "Timestamp": ts}
            if rng.random() < 0.95:
                row[TORQUE] = round(rng.uniform(-10, 10), 3)
            if rng.random() < 0.55:
                row[SPEED] = rng.uniform(0, 3000)
            row["vaLoad_C11"] = rng.random()
            row["vaCurr_C11"] = rng.uniform(-2, 2)
            row["id"] = f"{rng.getrandbits(128):032x}"
            f.write(json.dumps(row))
            f.write("\n")
            if n and n % 100_000 == 0:
                status(f"generated {n:,} rows")


def baseline(path: Path, out_path: Path) -> int:
    """The straightforward way: parse every line, sort each stream, bisect for prev/next."""
    streams: dict[tuple[str, str], list[tuple[int, float]]] = {}
    last: dict[tuple[str, str], int] = {}
    with path.open() as f:
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            for q in (SPEED, TORQUE):
                v = row.get(q)
                if v is None:
                    continue
                sk = (row["Thing"], q)
                t = row["Timestamp"]
                if sk in last and t <= last[sk]:
                    continue  # late
                last[sk] = t
                streams.setdefault(sk, []).append((t, v))
    n = 0
    with out_path.open("w") as out:
        for key in sorted({k for k, _ in streams}):
            left = sorted(streams.get((key, SPEED), []))
            right = sorted(streams.get((key, TORQUE), []))
            lt = [t for t, _ in left]
            rt = [t for t, _ in right]
            pairs = set()
            for i, (t, _) in enumerate(left):
                j = bisect_right(rt, t) - 1
                if j >= 0:
                    pairs.add((i, j))
                j = bisect_left(rt, t)
                if j < len(rt):
                    pairs.add((i, j))
            for j, (t, _) in enumerate(right):
                i = bisect_right(lt, t) - 1
                if i >= 0:
                    pairs.add((i, j))
                i = bisect_left(lt, t)
                if i < len(lt):
                    pairs.add((i, j))
            for i, j in sorted(pairs, key=lambda p: (max(lt[p[0]], rt[p[1]]), lt[p[0]], rt[p[1]])):
                (a, av), (b, bv) = left[i], right[j]
                out.write(
                    json.dumps(
                        {
                            "thing": key,
                            "left_time": a,
                            "right_time": b,
                            "left_value": av,
                            "right_value": bv,
                            "result": mechanical_power(av, bv),
                            "event_time": max(a, b),
                        }
                    )
                )
                out.write("\n")
                n += 1
    return n


def load_arrays(path: Path) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per key: (quantity codes, times, values) in file order, for the in-memory paths."""
    per: dict[str, tuple[list, list, list]] = {k: ([], [], []) for k in KEYS}
    with path.open() as f:
        for line in f:
            row = json.loads(line)
            q, t, v = per[row["Thing"]]
            for code, name in ((0, SPEED), (1, TORQUE)):
                if name in row:
                    q.append(code)
                    t.append(row["Timestamp"])
                    v.append(row[name])
    return {
        k: (np.array(q, np.intp), np.array(t, np.int64), np.array(v, np.float64))
        for k, (q, t, v) in per.items()
    }


def bench_batch(cfg: JoinConfig, arrays, batch: int) -> tuple[int, float]:
    pairs = 0
    started = time.perf_counter()
    for q, t, v in arrays.values():
        state = None
        for lo in range(0, len(q), batch):
            r = process_batch(
                cfg, state, q[lo : lo + batch], t[lo : lo + batch], v[lo : lo + batch]
            )
            state = r.state
            pairs += len(r.pairs)
        pairs += len(process_batch(cfg, state, q[:0], t[:0], v[:0], end_of_stream=True).pairs)
    return pairs, time.perf_counter() - started


def run_cli(events: Path, out: Path) -> tuple[int, str]:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "lsb",
            "--input",
            str(events),
            "--left",
            SPEED,
            "--right",
            TORQUE,
            "--output",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    line = r.stderr.strip().splitlines()[-1]
    return int(line.split("pairs=")[1].split()[0]), line


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs per measurement; the fastest counts"
    )
    ap.add_argument("--batch", type=int, default=100_000, help="records per process_batch call")
    ap.add_argument(
        "--keep", type=Path, default=None, help="directory to keep the generated files in"
    )
    args = ap.parse_args()
    tmp = tempfile.TemporaryDirectory(prefix="bench_lsb_")
    work = args.keep or Path(tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    events = work / "events.jsonl"
    status(f"generating {args.rows:,} rows into {events}")
    generate(events, args.rows, args.seed)
    size_mb = events.stat().st_size / 1e6

    base_pairs, base_s, base_cpu = best_of(
        lambda: baseline(events, work / "baseline.jsonl"), args.repeat, "baseline"
    )
    (cli_pairs, cli_line), cli_s, cli_cpu = best_of(
        lambda: run_cli(events, work / "cli.jsonl"), args.repeat, "cli"
    )
    status(f"cli summary: {cli_line}")

    cfg = JoinConfig.single(SPEED, TORQUE)
    status("loading arrays for the in-memory paths ...")
    arrays = load_arrays(events)
    batch_pairs, batch_s, batch_cpu = best_of(
        lambda: bench_batch(cfg, arrays, args.batch)[0], args.repeat, "batch"
    )

    same = batch_pairs == cli_pairs == base_pairs
    base_rate, base_cpu_rate = base_pairs / base_s, base_pairs / base_cpu
    rows = [
        ("baseline (json+sort+bisect)", base_pairs, base_s, base_cpu),
        ("cli end to end (subprocess)", cli_pairs, cli_s, cli_cpu),
        (f"batch path ({args.batch:,}/call)", batch_pairs, batch_s, batch_cpu),
    ]
    print(
        f"\ninput: {args.rows:,} rows, {size_mb:.1f} MB, seed {args.seed}; best of {args.repeat}; "
        f"pair counts agree: {same}"
    )
    print(
        f"{'path':<36}{'pairs':>10}{'wall s':>8}{'joins/s':>12}{'x base':>8}"
        f"{'cpu s':>8}{'joins/cpu-s':>13}{'x base':>8}"
    )
    for name, pairs, secs, cpu in rows:
        print(
            f"{name:<36}{pairs:>10,}{secs:>8.2f}{pairs / secs:>12,.0f}"
            f"{pairs / secs / base_rate:>8.2f}"
            f"{cpu:>8.2f}{pairs / cpu:>13,.0f}{pairs / cpu / base_cpu_rate:>8.2f}"
        )
    cli_ratio = (cli_pairs / cli_s) / base_rate
    print(
        f"\ntarget cli >= 5x baseline (wall): {'met' if cli_ratio >= 5 else 'MISSED'} "
        f"({cli_ratio:.2f}x; cpu {(cli_pairs / cli_cpu) / base_cpu_rate:.2f}x)"
    )
    rate = batch_pairs / batch_s
    print(f"target batch >= 2M joins/s: {'met' if rate >= 2e6 else 'MISSED'} ({rate:,.0f})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
