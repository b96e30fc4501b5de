"""The expectation against what InfluxDB holds, per measurement: each point matched by its
record's identity (KEYS), then value by value. Four kinds of difference, kept apart:

- missing: an expected record with no point;
- extra: a point that is no expected record;
- duplicated: a record with more than one point (same identity, another time or tag set: what a
  duplicate delivery under another point identity would leave);
- different: a point whose values differ from the record's.

Computed floats (a joined result, a window's mean and standard deviation) are equal to rounding
(relative 1e-12, 1e-9 for the standard deviation); every other value exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from stacktools.verify.points import KEYS, TEXT_VALUES, VALUES

CLOSE = {
    "mean": 1e-12,
    "result": 1e-12,
    "stddev": 1e-9,
    # the statistics' sums over pieces (in another order than the operator's)
    "motoring_kwh": 1e-9,
    "regenerative_kwh": 1e-9,
    "energy_kwh": 1e-9,
    "mean_w": 1e-9,
    "mean_pct": 1e-9,
    "duty_pct": 1e-12,
    "share_pct": 1e-12,
}
EXAMPLES = 3
KINDS = ("missing", "extra", "duplicated", "different")
TIME_KEYS = ("time_ms", "start_ms", "left_time_ms", "right_time_ms")


@dataclass
class Verdict:
    """One measurement's comparison: counts per kind and per Thing, a few examples of each."""

    measurement: str
    compared: int = 0
    matched: int = 0
    #: windows, cycles or pairs the data alone has not made final (an idle flush may have
    #: emitted them): not required, equal when present
    pending: int = 0
    uncertain: int = 0  # live: expected records not certain yet (not required)
    resent: int = 0  # late points of identical re-sends (stacktools.verify.resends)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    by_thing: dict[str, dict[str, int]] = field(default_factory=dict)
    examples: dict[str, list] = field(default_factory=lambda: {k: [] for k in KINDS})

    @property
    def exact(self) -> bool:
        return not any(self.counts.values())

    def note(self, kind: str, frame: pd.DataFrame, describe) -> None:
        if not len(frame):
            return
        self.counts[kind] += len(frame)
        for thing, n in frame["thing"].value_counts().items():
            if not n:
                continue
            self.by_thing.setdefault(str(thing), dict.fromkeys(KINDS, 0))[kind] += int(n)
        room = EXAMPLES - len(self.examples[kind])
        for _, row in frame.head(room).iterrows():
            self.examples[kind].append(describe(row))

    def as_dict(self) -> dict:
        return {
            "measurement": self.measurement,
            "exact": self.exact,
            "expected": self.compared,
            "matched": self.matched,
            "pending_windows": self.pending,
            "not_yet_certain": self.uncertain,
            "resent_copies": self.resent,
            **self.counts,
            "by_thing": self.by_thing,
            "examples": self.examples,
        }


def _plain(value: object) -> object:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and np.isnan(value):
        return None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _identity(keys: list[str], row: pd.Series) -> dict:
    return {k: _plain(row[k]) for k in keys}


def _same(name: str, want: pd.Series, got: pd.Series) -> np.ndarray:
    """Element-wise equality of one value column; absent on both sides is equal."""
    if name == "extra_tags":  # expected: none
        return got.astype(object).fillna("").astype(str).to_numpy() == ""
    if name in TEXT_VALUES:
        return (
            want.astype(object).fillna("").astype(str).to_numpy()
            == got.astype(object).fillna("").astype(str).to_numpy()
        )
    if name == "time_ns":  # integers beyond a double's precision
        return want.to_numpy(np.int64, na_value=-1) == got.to_numpy(np.int64, na_value=-2)
    a = pd.to_numeric(want, errors="coerce").to_numpy(dtype=np.float64)
    b = pd.to_numeric(got, errors="coerce").to_numpy(dtype=np.float64)
    both_absent = np.isnan(a) & np.isnan(b)
    if name in CLOSE:
        near = np.isclose(a, b, rtol=CLOSE[name], atol=1e-12)
    else:
        near = a == b
    return both_absent | near


def _keyed(want: pd.DataFrame, got: pd.DataFrame, keys: list[str]) -> None:
    """Key columns of one type on both sides: times as float64 (exact below 2**53 ms), text as
    categoricals over the same categories (merged by code, not by string)."""
    for key in keys:
        if key in TIME_KEYS:
            want[key] = pd.to_numeric(want[key], errors="coerce").astype(np.float64)
            got[key] = pd.to_numeric(got[key], errors="coerce").astype(np.float64)
            continue
        sides = []
        for frame in (want, got):
            column = frame[key]
            if not isinstance(column.dtype, pd.CategoricalDtype):
                column = column.fillna("").astype(str).astype("category")
            sides.append(column)
        categories = sides[0].cat.categories.union(sides[1].cat.categories)
        want[key] = sides[0].cat.set_categories(categories)
        got[key] = sides[1].cat.set_categories(categories)


def _hashed(frame: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """One 64-bit hash per row of its identity: one sort of both sides finds every match (a
    collision would only put two records in one group, where the values then differ)."""
    if not len(frame):
        return np.zeros(0, dtype=np.uint64)
    return pd.util.hash_pandas_object(frame[keys], index=False).to_numpy(np.uint64)


def _as_text(column: pd.Series) -> np.ndarray:
    return column.astype(object).fillna("").astype(str).to_numpy()


def _column_equal(name: str, want: pd.Series, got: pd.Series, w: np.ndarray, g: np.ndarray):
    """:func:`_same` on whole columns taken at (w, g), without building a Series per pair."""
    if name == "extra_tags":  # expected: none, so only the found side matters
        codes = got.cat.codes.to_numpy()[g]
        empty = list(got.cat.categories).index("") if "" in got.cat.categories else -2
        return (codes == -1) | (codes == empty)
    if name in TEXT_VALUES:
        return _as_text(want)[w] == _as_text(got)[g]
    if name == "time_ns":  # integers beyond a double's precision
        return want.to_numpy(np.int64, na_value=-1)[w] == got.to_numpy(np.int64, na_value=-2)[g]
    a = pd.to_numeric(want, errors="coerce").to_numpy(dtype=np.float64)[w]
    b = pd.to_numeric(got, errors="coerce").to_numpy(dtype=np.float64)[g]
    both_absent = np.isnan(a) & np.isnan(b)
    if name in CLOSE:
        return both_absent | np.isclose(a, b, rtol=CLOSE[name], atol=1e-12)
    return both_absent | (a == b)


def _values_equal(
    measurement: str,
    want: pd.DataFrame,
    got: pd.DataFrame,
    w: np.ndarray,
    g: np.ndarray,
    keys: list[str],
) -> tuple[np.ndarray, list[str]]:
    """Per (want row w[k], got row g[k]): all values equal, and the identity too (against a hash
    collision; text keys by their shared categories' codes); and the compared names."""
    compared = [*VALUES[measurement], "extra_tags"]
    ok = np.ones(len(w), dtype=bool)
    pending = (
        want["pending"].to_numpy(bool)[w] if "pending" in want.columns else np.zeros(len(w), bool)
    )
    for name in keys:
        if name in TIME_KEYS:
            ok &= _column_equal(name, want[name], got[name], w, g)
        else:
            ok &= want[name].cat.codes.to_numpy()[w] == got[name].cat.codes.to_numpy()[g]
    for name in compared:
        same = _column_equal(name, want[name], got[name], w, g)
        if name == "closed_at_ms":  # a window the idle timeout emitted has none
            same = same | pending
        ok &= same
    return ok, compared


def compare(
    measurement: str,
    want: pd.DataFrame,
    got: pd.DataFrame,
    certain: pd.Series | None = None,
    resent: Callable[[pd.DataFrame], np.ndarray] | None = None,
    keys: list[str] | None = None,
) -> Verdict:
    """``certain``: live mode, a boolean per expected row: only those may be missing.
    ``resent``: which unexpected points are identical re-sends, counted apart from ``extra``.
    ``keys``: the identity, when a source matches by more than the measurement's KEYS (the
    late topic: which copy of an identity a record is)."""
    keys = list(keys or KEYS[measurement])
    verdict = Verdict(measurement, compared=len(want))
    want, got = want.reset_index(drop=True).copy(), got.reset_index(drop=True).copy()
    _keyed(want, got, keys)
    if "extra_tags" not in got.columns:
        got["extra_tags"] = pd.Categorical.from_codes(
            np.zeros(len(got), dtype=np.int8), categories=[""]
        )
    elif not isinstance(got["extra_tags"].dtype, pd.CategoricalDtype):
        got["extra_tags"] = got["extra_tags"].fillna("").astype(str).astype("category")
    want["time_ns"] = want["time_ns"].astype("Int64")
    got["time_ns"] = got["time_ns"].astype("Int64")
    want["extra_tags"] = pd.Categorical.from_codes(
        np.zeros(len(want), dtype=np.int8), categories=[""]
    )
    required = np.ones(len(want), dtype=bool)
    if "pending" in want.columns:
        required = ~want["pending"].to_numpy(bool)
        verdict.pending = int((~required).sum())
    if certain is not None:
        verdict.uncertain = int((required & ~certain.to_numpy()).sum())
        required &= certain.to_numpy()

    hashes = np.concatenate((_hashed(want, keys), _hashed(got, keys)))
    side = np.concatenate((np.zeros(len(want), np.int8), np.ones(len(got), np.int8)))
    index = np.concatenate((np.arange(len(want)), np.arange(len(got))))
    order = np.argsort(hashes, kind="stable")  # stable: a group's expected row comes first
    hashes, side, index = hashes[order], side[order], index[order]
    first = (
        np.concatenate(([True], hashes[1:] != hashes[:-1])) if len(hashes) else np.zeros(0, bool)
    )
    group = np.cumsum(first) - 1
    groups = int(group[-1]) + 1 if len(group) else 0
    wanted = np.bincount(group, weights=side == 0, minlength=groups) > 0
    found = np.bincount(group, weights=side == 1, minlength=groups).astype(np.int64)

    def describe(row: pd.Series) -> dict:
        out = {**_identity(keys, row)}
        out.update({v: _plain(row[v]) for v in VALUES[measurement] if v in row})
        return out

    is_want, is_got = side == 0, side == 1
    lonely_want = is_want & (found[group] == 0)
    missing_rows = index[lonely_want]
    missing_rows = np.sort(missing_rows[required[missing_rows]])
    verdict.note("missing", want.iloc[missing_rows], describe)
    extra_rows = np.sort(index[is_got & ~wanted[group]])
    if resent is not None:
        copies = resent(got.iloc[extra_rows])
        verdict.resent = int(copies.sum())
        extra_rows = extra_rows[~copies]
    verdict.note("extra", got.iloc[extra_rows], describe)
    earlier_got = np.r_[False, (group[1:] == group[:-1]) & (side[:-1] == 1)]
    doubled_first = is_got & ~earlier_got & (found[group] > 1)
    doubled_rows = index[doubled_first]
    doubled = got.iloc[doubled_rows].assign(points=found[group[doubled_first]])
    verdict.note(
        "duplicated",
        doubled,
        lambda row: {**_identity(keys, row), "points": int(row["points"])},
    )
    # every found point of an expected record, paired with that record
    group_want = np.full(groups, -1, dtype=np.int64)
    group_want[group[is_want]] = index[is_want]
    paired = is_got & wanted[group]
    g = index[paired]
    w = group_want[group[paired]]
    ok, compared = _values_equal(measurement, want, got, w, g, keys)
    group_ok = np.bincount(group[paired], weights=ok, minlength=groups) > 0
    verdict.matched = int((group_ok & wanted).sum())
    # a record none of whose points equals it: the first of its points shows the difference
    bad = ~group_ok[group[paired]]
    first_bad = bad & np.r_[True, group[paired][1:] != group[paired][:-1]]
    wrong_w, wrong_g = w[first_bad], g[first_bad]

    rows = []
    for k in range(min(len(wrong_w), EXAMPLES)):
        wr, gr = want.iloc[wrong_w[k]], got.iloc[wrong_g[k]]
        changed = {}
        for name in compared:
            a, b = pd.Series([wr[name]]), pd.Series([gr[name]])
            same = bool(_same(name, a, b)[0])
            if name == "closed_at_ms" and "pending" in want.columns and wr["pending"]:
                same = True
            if not same:
                changed[name] = {"expected": _plain(wr[name]), "found": _plain(gr[name])}
        rows.append({**_identity(keys, wr), "values": changed})
    different = want.iloc[np.sort(wrong_w)]
    verdict.counts["different"] += len(different)
    for thing, n in different["thing"].value_counts().items():
        if n:
            verdict.by_thing.setdefault(str(thing), dict.fromkeys(KINDS, 0))["different"] += int(n)
    verdict.examples["different"] = rows
    return verdict
