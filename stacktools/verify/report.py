"""The verdict as a person reads it: one line per measurement, then per kind of difference the
Things it touches and a few examples."""

from __future__ import annotations

import json

from stacktools.verify.check import Outcome
from stacktools.verify.compare import KINDS

THINGS_SHOWN = 5


def render(outcome: Outcome) -> str:
    lines = []
    for v in outcome.verdicts:
        extra = []
        if v.pending:
            one, many = {
                "opstats": ("cycle", "cycles"),
                "opstats_band": ("band of a cycle", "bands of cycles"),
                "joined": ("pair", "pairs"),
                "overload": ("alert", "alerts"),
            }.get(v.measurement, ("window", "windows"))
            extra.append(
                f"{v.pending:,} {one if v.pending == 1 else many} still open (not required)"
            )
        if v.uncertain:
            extra.append(f"{v.uncertain:,} not certain yet (live)")
        if v.resent:
            extra.append(f"{v.resent:,} re-sent copies set aside (at-least-once input, harmless)")
        if outcome.notes.get(v.measurement):
            extra.append(outcome.notes[v.measurement])
        state = "exact" if v.exact else "DIFFERS"
        counts = ", ".join(f"{v.counts[k]:,} {k}" for k in KINDS)
        note = f"  [{'; '.join(extra)}]" if extra else ""
        lines.append(f"  {v.measurement:<10} {state:<8} {v.matched:>10,} equal, {counts}{note}")
        for kind in KINDS:
            if not v.counts[kind]:
                continue
            touched = [
                (t, c[kind]) for t, c in sorted(v.by_thing.items(), key=lambda kv: -kv[1][kind])
            ]
            touched = [(t, n) for t, n in touched if n]
            shown = ", ".join(f"{t} {n:,}" for t, n in touched[:THINGS_SHOWN])
            more = f" and {len(touched) - THINGS_SHOWN} more" if len(touched) > THINGS_SHOWN else ""
            lines.append(f"      {kind} by Thing: {shown}{more}")
            for example in v.examples[kind]:
                lines.append(f"        e.g. {json.dumps(example, default=str)}")
    mode = "live run, what is certain so far" if outcome.live else "finished replay"
    plural = outcome.source != "InfluxDB"  # "the Kafka topics hold"
    verdict = (
        f"EXACT: {outcome.source} {'hold' if plural else 'holds'} exactly what the file implies"
        if outcome.exact
        else f"DIFFERENT: {outcome.source} {'do' if plural else 'does'} not hold exactly what "
        "the file implies"
    )
    head = (
        f"verify ({mode}, {outcome.source}): {outcome.rows:,} rows, {outcome.records:,} records, "
        f"{outcome.seconds.get('total', 0):.1f} s"
    )
    return "\n".join([head, *lines, f"verify: {verdict}"])
