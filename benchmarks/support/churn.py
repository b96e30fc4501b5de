"""Weeks of event time for the soak's replay mode: a fleet whose machines join and leave, whose
firmware renames a quantity now and then, and one machine that sends a new quantity name in every
row (a firmware bug, or hostile input).

A plant's state and disk must stay flat under exactly this: a retired machine's state dropped
after the state retention, a renamed quantity's windows after it, and a flood of names stopped
by the per-thing limit. The values come from the simulator's machine model, one row a ``step``
of event time per active machine, so the join, the windows and the statistics see real shapes.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from simulator.generate import Machine

#: the extra quantity a machine's firmware sends, renamed at every update (``temp_fw<n>``)
FIRMWARE_QUANTITY = "temp_fw"
#: the prefix of the hostile machine's names, a new one in every row (``junk_<n>``)
HOSTILE_QUANTITY = "junk_"


@dataclass(frozen=True)
class Churn:
    """The fleet over time. Half of ``machines`` run from the start; the rest join at random
    times in the first three quarters of ``span``; every machine but the hostile ones leaves
    after a random lifetime of a quarter to three quarters of ``span``, or stays."""

    span: timedelta = timedelta(weeks=4)
    machines: int = 24
    step: timedelta = timedelta(minutes=1)
    #: mean event time between two firmware updates of one machine (each renames a quantity)
    firmware_every: timedelta = timedelta(days=3)
    hostile: int = 1
    seed: int = 1


@dataclass
class _Member:
    machine: Machine
    leave_ms: int
    firmware: int
    next_update_ms: int
    hostile: bool
    sent: int = 0


def _members(churn: Churn, start_ms: int) -> list[_Member]:
    rng = random.Random(churn.seed)
    span_ms = int(churn.span.total_seconds() * 1000)
    update_ms = churn.firmware_every.total_seconds() * 1000
    members = []
    for index in range(churn.machines):
        joins = (
            start_ms
            if index < churn.machines // 2
            else start_ms + int(rng.uniform(0, 0.75) * span_ms)
        )
        hostile = index < churn.hostile
        stays = hostile or rng.random() < 0.25
        leave = start_ms + span_ms if stays else joins + int(rng.uniform(0.25, 0.75) * span_ms)
        machine = Machine(f"M{index:04d}", random.Random(rng.getrandbits(64)), joins)
        next_update = joins + int(rng.expovariate(1 / update_ms))
        members.append(_Member(machine, min(leave, start_ms + span_ms), 0, next_update, hostile))
    return members


def churn_rows(churn: Churn, start_ms: int) -> Iterator[dict]:
    """The fleet's rows in event-time order from ``start_ms`` for ``churn.span``."""
    step_ms = int(churn.step.total_seconds() * 1000)
    update_ms = churn.firmware_every.total_seconds() * 1000
    members = _members(churn, start_ms)
    heap = [(m.machine.next_ms, index) for index, m in enumerate(members)]
    heapq.heapify(heap)
    while heap:
        timestamp, index = heapq.heappop(heap)
        member = members[index]
        if timestamp >= member.leave_ms:
            continue  # left the fleet: never heard of again
        machine = member.machine
        row = machine.advance()
        rng = machine.rng
        if timestamp >= member.next_update_ms:
            member.firmware += 1
            member.next_update_ms = timestamp + int(rng.expovariate(1 / update_ms))
        row[f"{FIRMWARE_QUANTITY}{member.firmware}"] = round(rng.gauss(40.0, 2.0), 3)
        if member.hostile:
            row[f"{HOSTILE_QUANTITY}{member.sent}"] = 1.0
        member.sent += 1
        machine.next_ms = timestamp + step_ms + rng.randint(-500, 500)
        heapq.heappush(heap, (machine.next_ms, index))
        yield {"Thing": machine.thing, "Timestamp": timestamp, **row}


def churn_file(churn: Churn, start_ms: int, path: Path) -> int:
    """Writes the fleet's rows to ``path`` (the simulator's JSON lines); returns their number."""
    rows = 0
    with path.open("w") as handle:
        for row in churn_rows(churn, start_ms):
            handle.write(json.dumps(row) + "\n")
            rows += 1
    return rows
