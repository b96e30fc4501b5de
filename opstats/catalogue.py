"""The machine catalogue: master data that telemetry does not carry.

Per Thing pattern and component pattern it gives the rated power, the power bands, the duty
rating (the relative duty factor a drive is rated for, IEC 60034-1 S3) and the physical bound
beyond which a power value is a fault rather than a load. One file, YAML or CSV, read and
checked once at start; every mistake names the file, the line and the field. Entries are
tried in file order and the first whose patterns match wins; a component no entry names gets
the defaults and is marked so, to be said once in the log and in a metric.

A rating's id hashes what it decides (never the file as a whole): a statistic carries the id
of the rating it was computed under, so figures made under different ratings never mix, while
adding a machine to the catalogue leaves every other machine's figures as they were.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml

from opstats.errors import CatalogueError

#: The original dashboards' rating: 20 kW, five bands of 20 %, "ED 40 %", a bound of 10x.
DEFAULT_RATED_POWER_KW = 20.0
DEFAULT_BANDS_PCT = (0.0, 20.0, 40.0, 60.0, 80.0, 100.0)
DEFAULT_DUTY_RATING_PCT = 40.0
DEFAULT_PHYSICAL_BOUND = 10.0

FIELDS = ("rated_power_kw", "bands_pct", "duty_rating_pct", "physical_bound")
PATTERNS = ("thing", "component")


@dataclass(frozen=True)
class Rating:
    """What one component is rated for. ``defaulted``: no catalogue entry named it."""

    rated_power_kw: float = DEFAULT_RATED_POWER_KW
    bands_pct: tuple[float, ...] = DEFAULT_BANDS_PCT
    duty_rating_pct: float = DEFAULT_DUTY_RATING_PCT
    #: |P| above this many times the rated power is not a load but a fault
    physical_bound: float = DEFAULT_PHYSICAL_BOUND
    defaulted: bool = field(default=False, compare=False)

    @property
    def rated_power_w(self) -> float:
        return self.rated_power_kw * 1000.0

    @property
    def edges_w(self) -> tuple[float, ...]:
        """The band edges in watts of |P|: band k is [edge k, edge k+1), the top band includes
        its upper edge (the rated power), and above it is the overload band."""
        return tuple(self.rated_power_w * pct / 100.0 for pct in self.bands_pct)

    @property
    def bound_w(self) -> float:
        return self.rated_power_w * self.physical_bound

    @property
    def band_names(self) -> tuple[str, ...]:
        """``0-20``, ..., ``80-100`` and ``over-100``: the InfluxDB ``band`` tag."""
        edges = [_short(e) for e in self.bands_pct]
        return (*(f"{a}-{b}" for a, b in zip(edges, edges[1:], strict=False)), f"over-{edges[-1]}")

    @property
    def rating_id(self) -> str:
        """16 hex chars naming what the rating decides; part of each statistic's identity."""
        text = json.dumps(
            [self.rated_power_kw, list(self.bands_pct), self.duty_rating_pct, self.physical_bound]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _short(pct: float) -> str:
    return str(int(pct)) if float(pct).is_integer() else repr(float(pct))


@dataclass(frozen=True)
class Entry:
    thing: str
    component: str
    rating: Rating
    line: int


@dataclass(frozen=True)
class Catalogue:
    """The entries in file order; ``source`` names the file (empty: built-in defaults)."""

    entries: tuple[Entry, ...] = ()
    default: Rating = Rating(defaulted=True)
    source: str = ""
    content_hash: str = ""

    def rating(self, thing: str, component: str) -> Rating:
        for entry in self.entries:
            if fnmatchcase(thing, entry.thing) and fnmatchcase(component, entry.component):
                return entry.rating
        return self.default


def load_catalogue(path: Path | str | None) -> Catalogue:
    """The catalogue in ``path`` (``.csv``: CSV, else YAML); None or empty: the defaults."""
    if not path:
        return Catalogue()
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CatalogueError(path, None, "file", exc.strerror or str(exc)) from None
    try:
        text = raw.decode()
    except UnicodeDecodeError as exc:
        raise CatalogueError(path, None, "file", f"not UTF-8 text ({exc.reason})") from None
    read = _read_csv if path.suffix.lower() == ".csv" else _read_yaml
    default, entries = read(path, text)
    return Catalogue(tuple(entries), default, str(path), hashlib.sha256(raw).hexdigest()[:16])


# --- one entry's fields -------------------------------------------------------------------


def _rating(
    path: Path, fields: dict[str, tuple[Any, int]], base: Rating, line: int, *, entry: bool
) -> Rating:
    """A rating from ``fields`` (name -> (value, line)), what they leave out from ``base``."""
    unknown = sorted(set(fields) - set(FIELDS) - set(PATTERNS))
    if unknown:
        name = unknown[0]
        raise CatalogueError(
            path, fields[name][1], name, f"unknown field (known: {', '.join(FIELDS)})"
        )
    if entry and "rated_power_kw" not in fields:
        raise CatalogueError(path, line, "rated_power_kw", "missing: an entry gives a rating")
    values: dict[str, Any] = {}
    for name in FIELDS:
        if name not in fields or fields[name][0] in (None, ""):
            if name in fields and name == "rated_power_kw" and entry:
                raise CatalogueError(
                    path, fields[name][1], name, "missing: an entry gives a rating"
                )
            continue
        value, at = fields[name]
        values[name] = (
            _bands(path, at, value) if name == "bands_pct" else _number(path, at, name, value)
        )
    rating = Rating(
        values.get("rated_power_kw", base.rated_power_kw),
        values.get("bands_pct", base.bands_pct),
        values.get("duty_rating_pct", base.duty_rating_pct),
        values.get("physical_bound", base.physical_bound),
        defaulted=not entry,
    )
    _check(path, fields, line, rating)
    return rating


def _number(path: Path, line: int, name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise CatalogueError(path, line, name, f"a number, not {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise CatalogueError(path, line, name, f"a number, not {value!r}") from None
    if not math.isfinite(number):
        raise CatalogueError(path, line, name, f"a finite number, not {value!r}")
    return number


def _bands(path: Path, line: int, value: Any) -> tuple[float, ...]:
    items = value.replace(";", " ").split() if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise CatalogueError(path, line, "bands_pct", f"a list of edges in %, not {value!r}")
    return tuple(_number(path, line, "bands_pct", item) for item in items)


def _check(path: Path, fields: dict[str, tuple[Any, int]], line: int, rating: Rating) -> None:
    def at(name: str) -> int:
        return fields[name][1] if name in fields else line

    if rating.rated_power_kw <= 0:
        raise CatalogueError(path, at("rated_power_kw"), "rated_power_kw", "must be > 0")
    edges = rating.bands_pct
    if len(edges) < 2 or edges[0] != 0 or edges[-1] != 100:
        raise CatalogueError(
            path, at("bands_pct"), "bands_pct", f"edges from 0 to 100, got {list(edges)}"
        )
    if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise CatalogueError(path, at("bands_pct"), "bands_pct", "edges must increase")
    if not 0 < rating.duty_rating_pct <= 100:
        raise CatalogueError(path, at("duty_rating_pct"), "duty_rating_pct", "must be in (0, 100]")
    if rating.physical_bound <= 1:
        raise CatalogueError(
            path, at("physical_bound"), "physical_bound", "must be > 1 (times the rated power)"
        )


def _entry(path: Path, fields: dict[str, tuple[Any, int]], default: Rating, line: int) -> Entry:
    """One entry of either format: its two patterns and its rating."""
    return Entry(
        _pattern(path, fields, line, "thing"),
        _pattern(path, fields, line, "component"),
        _rating(path, fields, default, line, entry=True),
        line,
    )


def _pattern(path: Path, fields: dict[str, tuple[Any, int]], line: int, name: str) -> str:
    value = fields.get(name, (None, line))[0]
    if not isinstance(value, str) or not value.strip():
        raise CatalogueError(path, fields.get(name, (None, line))[1], name, "missing pattern")
    return value.strip()


# --- the two file formats ------------------------------------------------------------------


def _read_yaml(path: Path, text: str) -> tuple[Rating, list[Entry]]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise CatalogueError(
            path, line, "file", f"not YAML: {getattr(exc, 'problem', exc)}"
        ) from None
    if root is None:
        return Catalogue().default, []
    top = _mapping(path, root, "file")
    unknown = sorted(set(top) - {"defaults", "machines"})
    if unknown:
        raise CatalogueError(path, top[unknown[0]][1], unknown[0], "unknown section")
    default = Catalogue().default
    if "defaults" in top:
        node = top["defaults"][2]
        fields = {k: (v, ln) for k, (v, ln, _) in _mapping(path, node, "defaults").items()}
        for name in PATTERNS:
            if name in fields:
                raise CatalogueError(
                    path, fields[name][1], name, "not a default: name it in an entry"
                )
        default = _rating(path, fields, default, node.start_mark.line + 1, entry=False)
    entries = []
    if "machines" in top:
        seq = top["machines"][2]
        if not isinstance(seq, yaml.SequenceNode):
            raise CatalogueError(path, seq.start_mark.line + 1, "machines", "a list of entries")
        for node in seq.value:
            line = node.start_mark.line + 1
            fields = {k: (v, ln) for k, (v, ln, _) in _mapping(path, node, "machines").items()}
            entries.append(_entry(path, fields, default, line))
    return default, entries


def _mapping(path: Path, node: yaml.Node, what: str) -> dict[str, tuple[Any, int, yaml.Node]]:
    """A YAML mapping as name -> (plain value, line of the key, value node)."""
    if not isinstance(node, yaml.MappingNode):
        raise CatalogueError(path, node.start_mark.line + 1, what, "a mapping of fields")
    out: dict[str, tuple[Any, int, yaml.Node]] = {}
    loader = yaml.SafeLoader("")
    for key, value in node.value:
        name = str(loader.construct_object(key, deep=True))
        line = key.start_mark.line + 1
        if name in out:
            raise CatalogueError(path, line, name, "given twice")
        plain = (
            None
            if isinstance(value, yaml.MappingNode)
            else loader.construct_object(value, deep=True)
        )
        out[name] = (plain, line, value)
    return out


def _read_csv(path: Path, text: str) -> tuple[Rating, list[Entry]]:
    reader = csv.reader(io.StringIO(text))
    rows = [(reader.line_num, row) for row in reader if any(cell.strip() for cell in row)]
    rows = [(n, r) for n, r in rows if not r[0].lstrip().startswith("#")]
    if not rows:
        return Catalogue().default, []
    head_line, head = rows[0]
    names = [cell.strip() for cell in head]
    for name in names:
        if name not in FIELDS + PATTERNS:
            raise CatalogueError(path, head_line, name, "unknown column")
    default = Catalogue().default
    entries = []
    for line, row in rows[1:]:
        if len(row) > len(names):
            raise CatalogueError(path, line, "row", f"{len(row)} cells under {len(names)} columns")
        fields = {
            name: (cell.strip(), line)
            for name, cell in zip(names, row, strict=False)
            if cell.strip() or name == "rated_power_kw"
        }
        entries.append(_entry(path, fields, default, line))
    return default, entries
