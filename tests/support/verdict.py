"""Exactly-once judged on values: two multisets of records (or points), each keyed by its
identity, compared into what is missing, extra, duplicated and different, reported separately
so a failure says which of the four went wrong and shows a few of each."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

Table = dict[Hashable, list[dict]]

#: Fields computed in floating point two ways (the oracle sums exactly, the job does not): equal
#: to rounding. Everything else must be equal exactly.
CLOSE = {"mean": 1e-12, "result": 1e-12, "stddev": 1e-9}
SHOWN = 3


def table(
    records: Iterable[dict],
    identity: Callable[[dict], Hashable],
    fields: Callable[[dict], dict] = lambda r: r,
) -> Table:
    out: Table = {}
    for r in records:
        out.setdefault(identity(r), []).append(fields(r))
    return out


def same_value(name: str, want: object, got: object) -> bool:
    if name in CLOSE and isinstance(want, float) and isinstance(got, (int, float)):
        return math.isclose(want, got, rel_tol=CLOSE[name], abs_tol=1e-12)
    return want == got


def differing(want: dict, got: dict) -> list[str]:
    """The fields whose values differ (a field on one side only counts)."""
    return [
        name
        for name in sorted(want.keys() | got.keys())
        if name not in want or name not in got or not same_value(name, want[name], got[name])
    ]


@dataclass
class Verdict:
    what: str
    compared: int = 0
    missing: list = field(default_factory=list)
    extra: list = field(default_factory=list)
    duplicated: list = field(default_factory=list)
    different: list = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return not (self.missing or self.extra or self.duplicated or self.different)

    def __str__(self) -> str:
        if self.exact:
            return f"{self.what}: {self.compared} equal"
        parts = [
            f"{len(found)} {kind} (e.g. {found[:SHOWN]})"
            for kind, found in (
                ("missing", self.missing),
                ("extra", self.extra),
                ("duplicated", self.duplicated),
                ("different", self.different),
            )
            if found
        ]
        return f"{self.what}: " + "; ".join(parts)


def compare(what: str, want: Table, got: Table, copies_allowed: bool = False) -> Verdict:
    """``copies_allowed``: identical copies of a record are one (the raw topic, where the bridge
    re-sends rows by design); a copy that differs is still reported."""
    verdict = Verdict(what, compared=len(want))
    for key in want.keys() - got.keys():
        verdict.missing.append(key)
    for key in got.keys() - want.keys():
        verdict.extra.append(key)
    for key in want.keys() & got.keys():
        mine, theirs = want[key], got[key]
        if copies_allowed:
            theirs = [
                r for i, r in enumerate(theirs) if all(differing(r, other) for other in theirs[:i])
            ]
        if len(theirs) > len(mine):
            verdict.duplicated.append((key, len(theirs), len(mine)))
        elif len(theirs) < len(mine):
            verdict.missing.append((key, len(mine) - len(theirs)))
        unmatched = list(theirs)
        unexplained = []
        for record in mine:
            match = next((r for r in unmatched if not differing(record, r)), None)
            if match is not None:
                unmatched.remove(match)
            else:
                unexplained.append(record)
        # what is left on their side differs from every record of ours left: a wrong value (a
        # copy beyond ours is a duplicate too, and still wrong if it matches none of ours)
        for other in unmatched:
            record = (unexplained or mine)[0]
            if differing(record, other) and all(differing(r, other) for r in mine):
                verdict.different.append(
                    (key, {f: (record.get(f), other.get(f)) for f in differing(record, other)})
                )
    return verdict


def assert_exact(*verdicts: Verdict) -> str:
    """Every verdict exact, or an AssertionError naming each one that is not; a summary line."""
    wrong = [str(v) for v in verdicts if not v.exact]
    assert not wrong, "\n".join(wrong)
    return ", ".join(str(v) for v in verdicts)
