"""python -m simulator.generate: write a realistic events.json, deterministic from a seed.

Shaped like the real sample (tests/data/test_events.json): several Things at ~1 Hz, the same
quantities (actSpeed_C11, cmdSpeed_C11, vaTorque_C11, vaCurr_C11, vaLoad_C11, vaPower_C11,
turnState_C11), rows holding different subsets of them, plus gaps (a machine offline for a
while) and bursts (several rows within one second). Physics holds: the machine follows a
speed set-point with inertia, torque follows the speed change plus load, and
vaPower_C11 = 2*pi/60 * speed[rpm] * torque[Nm]. Streams with constant memory.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from streamkit.cli import HelpFormatter, entry_point, program_name

DEFAULT_ROWS = 1_402_232
START_MS = 1_554_076_800_000  # 2019-04-01T00:00:00Z, where the real sample starts


@dataclass
class Machine:
    """One Thing's physical state; advanced once per emitted row."""

    thing: str
    rng: random.Random
    next_ms: int
    speed: float = 0.0
    setpoint: float = 0.0
    load: float = 0.3
    burst_left: int = 0

    def advance(self) -> dict:
        rng = self.rng
        if rng.random() < 0.01:  # new job: new set-point, sometimes standstill
            self.setpoint = 0.0 if rng.random() < 0.2 else rng.uniform(300.0, 3000.0)
        if rng.random() < 0.02:
            self.load = min(1.0, max(0.05, self.load + rng.gauss(0.0, 0.15)))
        previous = self.speed
        self.speed += (self.setpoint - self.speed) * 0.2 + rng.gauss(0.0, 3.0)
        self.speed = max(0.0, self.speed)
        acceleration = self.speed - previous
        torque = 0.02 * acceleration + 40.0 * self.load * (self.speed > 1.0) + rng.gauss(0.0, 0.5)
        current = torque * 0.3 + rng.gauss(0.0, 0.05)
        power = 2.0 * math.pi / 60.0 * self.speed * torque
        values = {
            "actSpeed_C11": round(self.speed, 3),
            "cmdSpeed_C11": round(self.setpoint, 3),
            "vaTorque_C11": round(torque, 3),
            "vaCurr_C11": round(current, 6),
            "vaLoad_C11": round(self.load * 100.0 + rng.gauss(0.0, 0.5), 6),
            "vaPower_C11": round(power, 3),
            "turnState_C11": float(self.speed > 1.0),
        }
        # Like the real data, most rows carry a subset: torque nearly always, speed about half the
        # time.
        keep = {
            "vaTorque_C11": 0.94,
            "actSpeed_C11": 0.54,
            "cmdSpeed_C11": 0.45,
            "vaCurr_C11": 0.8,
            "vaLoad_C11": 0.75,
            "vaPower_C11": 0.4,
            "turnState_C11": 0.1,
        }
        row = {name: value for name, value in values.items() if rng.random() < keep[name]}
        if not row:
            row["vaTorque_C11"] = values["vaTorque_C11"]
        self._schedule_next()
        return row

    def _schedule_next(self) -> None:
        rng = self.rng
        if self.burst_left > 0:
            self.burst_left -= 1
            self.next_ms += rng.randint(50, 200)
        elif rng.random() < 0.002:  # offline for 1 min .. 2 h
            self.next_ms += rng.randint(60_000, 7_200_000)
        elif rng.random() < 0.01:
            self.burst_left = rng.randint(3, 20)
            self.next_ms += rng.randint(50, 200)
        else:
            self.next_ms += 1000 + rng.randint(-3, 3)


def generate(rows: int, things: int, seed: int) -> Iterator[dict]:
    """Rows in event-time order across all Things (a heap of each machine's next row)."""
    master = random.Random(seed)
    machines = [
        Machine(
            f"M{index:04d}",
            random.Random(master.getrandbits(64)),
            START_MS + master.randint(0, 999),
        )
        for index in range(things)
    ]
    id_rng = random.Random(master.getrandbits(64))
    heap = [(m.next_ms, index) for index, m in enumerate(machines)]
    heapq.heapify(heap)
    for _ in range(rows):
        timestamp, index = heapq.heappop(heap)
        machine = machines[index]
        values = machine.advance()
        yield {
            "Thing": machine.thing,
            "Timestamp": timestamp,
            **values,
            "id": str(uuid.UUID(int=id_rng.getrandbits(128), version=4)),
        }
        heapq.heappush(heap, (machine.next_ms, index))


@entry_point("simulator.generate")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program_name("simulator.generate"),
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--output", "-o", type=Path, required=True, help="the events file to write (JSON lines)"
    )
    parser.add_argument(
        "--rows",
        type=int,
        default=DEFAULT_ROWS,
        help="rows to write; fewer for a quick test, more for a long replay",
    )
    parser.add_argument(
        "--things", type=int, default=8, help="machines (Things) the rows are spread over"
    )
    parser.add_argument(
        "--seed", type=int, default=42, help="random seed: the same seed writes the same file"
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (e.g. in a log file)"
    )
    args = parser.parse_args(argv)
    if args.rows < 0 or args.things < 1:
        parser.error("--rows must be >= 0 and --things >= 1")
    dumps = json.JSONEncoder(separators=(", ", ": ")).encode
    with (
        args.output.open("w") as out,
        tqdm(
            total=args.rows, unit="row", disable=args.no_progress, file=sys.stderr, mininterval=0.5
        ) as bar,
    ):
        for count, row in enumerate(generate(args.rows, args.things, args.seed), 1):
            out.write(dumps(row))
            out.write("\n")
            if count % 10_000 == 0:
                bar.update(10_000)
        bar.update(args.rows - bar.n)
    print(f"wrote {args.rows} rows for {args.things} things to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
