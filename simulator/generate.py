"""python -m simulator.generate: write a realistic events.json, deterministic from a seed.

Shaped like the real sample (tests/data/test_events.json): several Things at ~1 Hz, the same
quantities (actSpeed_C11, cmdSpeed_C11, vaTorque_C11, vaCurr_C11, vaLoad_C11, vaPower_C11,
turnState_C11), rows holding different subsets of them, plus gaps (a machine offline for a
while) and bursts (several rows within one second). Physics holds: the machine follows a
speed set-point with inertia, torque follows the speed change plus load, and
vaPower_C11 = 2*pi/60 * speed[rpm] * torque[Nm]. Streams with constant memory.

With ``--components N`` each machine has N drives: the spindle C11 and feed axes C12, C13, ...,
each with its own load profile (axes reverse and brake, so their power goes negative), overload
phases (minutes above the drive's rating) and stretches where the drive is parked and sends
nothing, for the operation statistics (docs/operation-statistics.md). The ratings the overloads
are made against are those of examples/machine-catalogue.yaml. One component writes exactly the
rows it always did.
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
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from streamkit.cli import HelpFormatter, entry_point, program_name

DEFAULT_ROWS = 1_402_232
START_MS = 1_554_076_800_000  # 2019-04-01T00:00:00Z, where the real sample starts
#: rated power (W) and top speed (rpm) of a spindle and an axis (examples/machine-catalogue.yaml)
SPINDLE_RATED_W, SPINDLE_MAX_RPM = 15_000.0, 3000.0
AXIS_RATED_W, AXIS_MAX_RPM = 4_000.0, 2500.0
_RAD_PER_RPM = 2.0 * math.pi / 60.0


@dataclass
class Drive:
    """One drive's load profile: a speed set-point it follows with inertia, a load, overload
    phases and parked stretches; its own random stream, so drives never shift each other."""

    name: str
    rated_w: float
    max_rpm: float
    rng: random.Random
    reverses: bool
    speed: float = 0.0
    setpoint: float = 0.0
    load: float = 0.4
    overload_left: int = 0
    parked_left: int = 0

    @property
    def rated_torque(self) -> float:
        return self.rated_w / (self.max_rpm * _RAD_PER_RPM)

    def advance(self) -> dict[str, float]:
        """This row's values of the drive; none while it is parked."""
        rng = self.rng
        if self.parked_left:
            self.parked_left -= 1
            self.speed = self.setpoint = 0.0
            return {}
        if rng.random() < 0.0015:  # parked for 1 to 20 minutes of rows
            self.parked_left = rng.randint(60, 1200)
        if rng.random() < 0.02:  # a new move: set-point, direction, sometimes standstill
            top = rng.uniform(0.1, 1.0) * self.max_rpm
            sign = -1.0 if self.reverses and rng.random() < 0.5 else 1.0
            self.setpoint = 0.0 if rng.random() < 0.2 else sign * top
        if rng.random() < 0.03:
            self.load = min(0.95, max(0.05, self.load + rng.gauss(0.0, 0.2)))
        if not self.overload_left and rng.random() < 0.0004:  # heavy cut: 2 to 8 minutes
            self.overload_left = rng.randint(120, 480)
            self.setpoint = math.copysign(
                rng.uniform(0.6, 1.0) * self.max_rpm, self.setpoint or 1.0
            )
        previous = self.speed
        self.speed += (self.setpoint - self.speed) * 0.25 + rng.gauss(0.0, 2.0)
        if abs(self.speed) < 1.0:
            self.speed = 0.0
        moving = self.speed != 0.0
        # the load pulls against the motion; a fast change of speed needs (or returns) torque
        inertia = 0.05 * self.rated_torque * (self.speed - previous) / max(1.0, abs(previous) + 1.0)
        along = math.copysign(1.0, self.speed) if moving else 0.0
        torque = along * self.rated_torque * self.load + inertia + rng.gauss(0.0, 0.2)
        if self.overload_left:  # near and above the rating, whatever the speed
            self.overload_left -= 1
            if abs(self.speed) > 0.2 * self.max_rpm:
                power = self.rated_w * rng.uniform(0.85, 1.45)
                torque = along * power / (_RAD_PER_RPM * abs(self.speed))
        elif moving and abs(self.speed) < abs(previous) and rng.random() < 0.5:
            torque = -along * abs(torque) * 0.6  # braking: the drive feeds energy back
        power = _RAD_PER_RPM * self.speed * torque
        values = {
            f"actSpeed_{self.name}": round(self.speed, 3),
            f"vaTorque_{self.name}": round(torque, 3),
            f"vaPower_{self.name}": round(power, 3),
        }
        keep = {"actSpeed": 0.7, "vaTorque": 0.95, "vaPower": 0.4}
        return {k: v for k, v in values.items() if rng.random() < keep[k.split("_")[0]]}


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
    #: the feed axes C12, ... (``--components`` above 1); the spindle is this machine's own model
    axes: list[Drive] = field(default_factory=list)
    #: the spindle's overload phase and parked stretch, rows left (with axes only)
    spindle: Drive | None = None

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
        if self.spindle is not None:
            self._spindle_phases(row)
            for axis in self.axes:
                row.update(axis.advance())
        self._schedule_next()
        return row

    def _spindle_phases(self, row: dict) -> None:
        """The spindle's overload phases and parked stretches, from its own random stream: the
        torque raised above the rating (and the power with it), or nothing of C11 sent."""
        spindle = self.spindle
        assert spindle is not None
        rng = spindle.rng
        if spindle.parked_left:
            spindle.parked_left -= 1
            for name in [n for n in row if n.endswith("_C11")]:
                del row[name]
            return
        if rng.random() < 0.001:
            spindle.parked_left = rng.randint(60, 900)
        if not spindle.overload_left and rng.random() < 0.0004:
            spindle.overload_left = rng.randint(120, 480)
        if spindle.overload_left:
            spindle.overload_left -= 1
            target = SPINDLE_RATED_W * rng.uniform(0.85, 1.45)
            speed = max(self.speed, 0.5 * SPINDLE_MAX_RPM)
            torque = target / (_RAD_PER_RPM * speed)
            for name, value in (
                ("actSpeed_C11", speed),
                ("vaTorque_C11", torque),
                ("vaPower_C11", _RAD_PER_RPM * speed * torque),
            ):
                if name in row or name == "vaTorque_C11":
                    row[name] = round(value, 3)

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


def generate(rows: int, things: int, seed: int, components: int = 1) -> Iterator[dict]:
    """Rows in event-time order across all Things (a heap of each machine's next row); each
    machine with ``components`` drives."""
    master = random.Random(seed)
    machines = [
        Machine(
            f"M{index:04d}",
            random.Random(master.getrandbits(64)),
            START_MS + master.randint(0, 999),
        )
        for index in range(things)
    ]
    if components > 1:
        for m in machines:
            streams = (random.Random(f"{seed}/{m.thing}/C{11 + k}") for k in range(components))
            m.spindle = Drive("C11", SPINDLE_RATED_W, SPINDLE_MAX_RPM, next(streams), False)
            m.axes = [
                Drive(f"C{12 + k}", AXIS_RATED_W, AXIS_MAX_RPM, stream, True)
                for k, stream in enumerate(streams)
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
        "--components",
        type=int,
        default=1,
        help="drives per machine: the spindle C11, then feed axes C12, C13, ...",
    )
    parser.add_argument(
        "--seed", type=int, default=42, help="random seed: the same seed writes the same file"
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (e.g. in a log file)"
    )
    args = parser.parse_args(argv)
    if args.rows < 0 or args.things < 1 or not 1 <= args.components <= 89:
        parser.error("--rows must be >= 0, --things >= 1 and --components from 1 to 89")
    dumps = json.JSONEncoder(separators=(", ", ": ")).encode
    with (
        args.output.open("w") as out,
        tqdm(
            total=args.rows, unit="row", disable=args.no_progress, file=sys.stderr, mininterval=0.5
        ) as bar,
    ):
        rows = generate(args.rows, args.things, args.seed, args.components)
        for count, row in enumerate(rows, 1):
            out.write(dumps(row))
            out.write("\n")
            if count % 10_000 == 0:
                bar.update(10_000)
        bar.update(args.rows - bar.n)
    print(f"wrote {args.rows} rows for {args.things} things to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
