"""The machine catalogue as verify reads it: each component's rating and rating id, from the
file's format as docs/operation-statistics.md describes it (YAML ``defaults`` and ``machines``,
or CSV with one entry a row), read here again rather than with the pipeline's reader.

The pipeline refuses a malformed catalogue at its start, so nothing is checked here beyond
what reading needs; a file verify cannot read is a usage error.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml

FIELDS = ("rated_power_kw", "bands_pct", "duty_rating_pct", "physical_bound")
#: The defaults of the specification (the original dashboards' rating).
BUILT_IN: dict[str, Any] = {
    "rated_power_kw": 20.0,
    "bands_pct": (0.0, 20.0, 40.0, 60.0, 80.0, 100.0),
    "duty_rating_pct": 40.0,
    "physical_bound": 10.0,
}


class CatalogueUnreadable(ValueError):
    """A catalogue file verify cannot read."""


@dataclass(frozen=True)
class Rated:
    rated_power_kw: float
    bands_pct: tuple[float, ...]
    duty_rating_pct: float
    physical_bound: float
    defaulted: bool

    @property
    def rated_w(self) -> float:
        return self.rated_power_kw * 1000.0

    @property
    def rating_id(self) -> str:
        """SHA-256 of the JSON array [rated kW, [edges], duty %, bound], numbers as floats: its
        first 16 hex digits (docs/operation-statistics.md, when the catalogue changes)."""
        text = json.dumps(
            [self.rated_power_kw, list(self.bands_pct), self.duty_rating_pct, self.physical_bound]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def band_names(self) -> list[str]:
        def short(pct: float) -> str:
            return str(int(pct)) if pct.is_integer() else repr(pct)

        edges = [short(e) for e in self.bands_pct]
        return [f"{a}-{b}" for a, b in zip(edges, edges[1:], strict=False)] + [f"over-{edges[-1]}"]


def _rated(fields: dict[str, Any], base: dict[str, Any], defaulted: bool) -> Rated:
    values = dict(base)
    for name in FIELDS:
        value = fields.get(name)
        if value is None or value == "":
            continue
        if name == "bands_pct":
            items = value.replace(";", " ").split() if isinstance(value, str) else value
            values[name] = tuple(float(x) for x in items)
        else:
            values[name] = float(value)
    return Rated(
        float(values["rated_power_kw"]),
        tuple(float(x) for x in values["bands_pct"]),
        float(values["duty_rating_pct"]),
        float(values["physical_bound"]),
        defaulted,
    )


@dataclass(frozen=True)
class Ratings:
    """(thing pattern, component pattern, rating) in file order; the first match wins."""

    entries: tuple[tuple[str, str, Rated], ...] = ()
    default: Rated = _rated({}, BUILT_IN, True)

    def of(self, thing: str, component: str) -> Rated:
        for thing_pattern, component_pattern, rated in self.entries:
            if fnmatchcase(thing, thing_pattern) and fnmatchcase(component, component_pattern):
                return rated
        return self.default


def read_ratings(path: str | Path | None) -> Ratings:
    """The catalogue at ``path`` (``.csv``: CSV, else YAML); empty: the built-in defaults."""
    if not path:
        return Ratings()
    path = Path(path)
    try:
        text = path.read_text()
        if path.suffix.lower() == ".csv":
            return _from_csv(text)
        return _from_yaml(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, TypeError, KeyError) as exc:
        raise CatalogueUnreadable(f"machine catalogue {path}: {exc}") from None


def _from_yaml(text: str) -> Ratings:
    root = yaml.safe_load(text) or {}
    defaults = root.get("defaults") or {}
    base = {**BUILT_IN, **{k: v for k, v in defaults.items() if v is not None}}
    default = _rated({}, base, True)
    entries = tuple(
        (str(item["thing"]).strip(), str(item["component"]).strip(), _rated(item, base, False))
        for item in root.get("machines") or []
    )
    return Ratings(entries, default)


def _from_csv(text: str) -> Ratings:
    lines = [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    entries = tuple(
        (row["thing"].strip(), row["component"].strip(), _rated(row, BUILT_IN, False))
        for row in csv.DictReader(io.StringIO("\n".join(lines)))
    )
    return Ratings(entries)
