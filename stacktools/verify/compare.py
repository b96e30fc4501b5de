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

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from stacktools.verify.expect import KEYS, VALUES

CLOSE = {"mean": 1e-12, "result": 1e-12, "stddev": 1e-9}
EXAMPLES = 3
KINDS = ("missing", "extra", "duplicated", "different")
TIME_KEYS = ("time_ms", "start_ms", "left_time_ms", "right_time_ms")


@dataclass
class Verdict:
    """One measurement's comparison: counts per kind and per Thing, a few examples of each."""

    measurement: str
    compared: int = 0
    matched: int = 0
    pending: int = 0  # windows not closed by the data: not required, equal when present
    uncertain: int = 0  # live: expected records not certain yet (not required)
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


def _identity(measurement: str, row: pd.Series) -> dict:
    return {k: _plain(row[k]) for k in KEYS[measurement]}


def _same(name: str, want: pd.Series, got: pd.Series) -> np.ndarray:
    """Element-wise equality of one value column; absent on both sides is equal."""
    if name == "extra_tags":  # expected: none
        return got.astype(object).fillna("").astype(str).to_numpy() == ""
    if name == "result_name":
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


def _keyed(want: pd.DataFrame, got: pd.DataFrame, measurement: str) -> None:
    """Key columns of one type on both sides: times as float64 (exact below 2**53 ms), text as
    categoricals over the same categories (merged by code, not by string)."""
    for key in KEYS[measurement]:
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


def compare(
    measurement: str,
    want: pd.DataFrame,
    got: pd.DataFrame,
    certain: pd.Series | None = None,
) -> Verdict:
    """``certain``: live mode, a boolean per expected row: only those may be missing."""
    keys, values = KEYS[measurement], VALUES[measurement]
    verdict = Verdict(measurement, compared=len(want))
    want, got = want.copy(), got.copy()
    _keyed(want, got, measurement)
    if "extra_tags" not in got.columns:
        got["extra_tags"] = ""
    # nullable integers: the outer merge must not turn times in ns into doubles
    want["time_ns"] = want["time_ns"].astype("Int64")
    got["time_ns"] = got["time_ns"].astype("Int64")
    none = pd.Categorical.from_codes(np.zeros(len(want), dtype=np.int8), categories=[""])
    want = want.assign(extra_tags=none, required=True)
    if "pending" in want.columns:
        want["required"] = ~want["pending"].astype(bool)
        verdict.pending = int(want["pending"].astype(bool).sum())
    if certain is not None:
        verdict.uncertain = int((want["required"] & ~certain.to_numpy()).sum())
        want["required"] = want["required"] & certain.to_numpy()

    def describe_missing(row: pd.Series) -> dict:
        return {**_identity(measurement, row), **{v: _plain(row[v]) for v in values}}

    copies = (
        got.groupby(keys, dropna=False, sort=False, observed=True)
        .size()
        .rename("points")
        .reset_index()
    )
    doubled = copies[copies["points"] > 1]
    verdict.note(
        "duplicated",
        doubled,
        lambda row: {**_identity(measurement, row), "points": int(row["points"])},
    )
    merged = want.merge(got, on=keys, how="outer", suffixes=("_want", "_got"), indicator=True)
    absent = merged[(merged["_merge"] == "left_only")]
    missing = absent[absent["required"].astype(bool)]
    verdict.note(
        "missing",
        missing.rename(columns={f"{v}_want": v for v in values}),
        describe_missing,
    )
    extra = merged[merged["_merge"] == "right_only"]
    verdict.note(
        "extra",
        extra.rename(columns={f"{v}_got": v for v in values}),
        describe_missing,
    )
    both = merged[merged["_merge"] == "both"]
    compared = [*values, "extra_tags"]
    if measurement == "aggregate":  # a window the idle timeout emitted has no closed_at_ms
        pending = both["pending"].astype(bool).to_numpy()
    else:
        pending = np.zeros(len(both), dtype=bool)
    wrong_fields = []
    ok = np.ones(len(both), dtype=bool)
    for name in compared:
        same = _same(name, both[f"{name}_want"], both[f"{name}_got"])
        if name == "closed_at_ms":
            same = same | pending
        wrong_fields.append((name, same))
        ok &= same
    # a record with several points: the one that equals it is the record, the others duplicates
    first_equal = both[ok].drop_duplicates(keys)
    verdict.matched = len(first_equal)
    wrong = both[~ok]
    if len(doubled):
        settled = first_equal[keys].assign(_settled=True)
        wrong = wrong.merge(settled, on=keys, how="left")
        wrong = wrong[wrong["_settled"].isna()].drop(columns="_settled")
        wrong = wrong.drop_duplicates(keys)

    def describe_different(row: pd.Series) -> dict:
        changed = {
            name: {"expected": _plain(row[f"{name}_want"]), "found": _plain(row[f"{name}_got"])}
            for name in compared
            if not bool(
                _same(name, pd.Series([row[f"{name}_want"]]), pd.Series([row[f"{name}_got"]]))[0]
            )
            and not (name == "closed_at_ms" and measurement == "aggregate" and row["pending"])
        }
        return {**_identity(measurement, row), "values": changed}

    verdict.note("different", wrong, describe_different)
    return verdict
