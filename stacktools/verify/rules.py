"""The stages' options the expectation needs, read from the same configuration the Spark job
reads (JOIN_*, AGGREGATE_* from the command line, the environment, .env), parsed here again:
only their text is shared with the pipeline, not its parser."""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.config import SinglePassSettings
from stacktools.verify.ratings import Ratings, read_ratings
from streamkit.durations import duration_ms, parse_duration_ms

#: The join's result functions, from their definitions in docs/join.md.
RESULT_NAMES = ("mechanical_power", "product", "difference")
OFF = {"", "off", "none"}


def component_in(quantity: str, prefix: str, suffix: str) -> str | None:
    """What a pattern's ``*`` (between ``prefix`` and ``suffix``) stands for in ``quantity``:
    at least one character; None when it does not match."""
    if (
        len(quantity) > len(prefix) + len(suffix)
        and quantity.startswith(prefix)
        and quantity.endswith(suffix)
    ):
        return quantity[len(prefix) : len(quantity) - len(suffix)]
    return None


@dataclass(frozen=True)
class Pair:
    """A JOIN_PAIRS item: two quantities, or two patterns with one ``*`` each (then
    :meth:`Rules.joined_pairs` makes one pair per component the file shows)."""

    left: str
    right: str
    result_name: str = "mechanical_power"
    component: str = ""

    @property
    def tag(self) -> str:
        return f"{self.left}:{self.right}"

    @property
    def is_pattern(self) -> bool:
        return "*" in self.left

    def components(self, quantities: list[str]) -> set[str]:
        """What the ``*`` of either name stands for in the names (never empty)."""
        around = [tuple(pattern.split("*")) for pattern in (self.left, self.right)]
        found = (component_in(q, prefix, suffix) for prefix, suffix in around for q in quantities)
        return {c for c in found if c is not None}

    def of(self, component: str) -> Pair:
        return Pair(
            self.left.replace("*", component),
            self.right.replace("*", component),
            self.result_name,
            component,
        )


@dataclass(frozen=True)
class Window:
    kind: str  # tumbling | sliding | session
    size_ms: int
    slide_ms: int  # a session's: its gap; a tumbling window's: its size

    @property
    def label(self) -> str:
        """The ``window`` tag (docs/influxdb-schema.md)."""
        if self.kind == "sliding":
            return f"sliding-{self.size_ms}-{self.slide_ms}"
        return f"{self.kind}-{self.size_ms}"


@dataclass(frozen=True)
class StatsRules:
    """The operation statistics (OPSTATS_*, MACHINE_CATALOGUE): the two inputs' names around
    the component, their result function, the cycle, the hold and the partner timeout."""

    left: tuple[str, str]  # prefix and suffix around the component
    right: tuple[str, str]
    result_name: str
    cycle_ms: int
    hold_ms: int
    partner_timeout_ms: int | None
    ratings: Ratings
    #: longer than this above the rated power overloads a cycle (None: the duty rating only)
    overload_after_ms: int | None = 60_000

    def side(self, quantity: str) -> tuple[str, int] | None:
        """(component, 0 for the left input or 1 for the right) of an input's quantity."""
        for side, (prefix, suffix) in enumerate((self.left, self.right)):
            component = component_in(quantity, prefix, suffix)
            if component is not None:
                return component, side
        return None

    def quantity(self, component: str, side: int) -> str:
        prefix, suffix = (self.left, self.right)[side]
        return f"{prefix}{component}{suffix}"


@dataclass(frozen=True)
class Rules:
    pairs: tuple[Pair, ...]
    max_gap_ms: int | None
    windows: tuple[Window, ...]
    lateness_ms: int
    stats: StatsRules | None = None

    def joined_pairs(self, quantities: list[str]) -> tuple[Pair, ...]:
        """The concrete pairs: the explicit ones, and each pattern pair once per component
        the file's quantity names show."""
        out: list[Pair] = []
        for pair in self.pairs:
            if pair.is_pattern:
                out += [pair.of(c) for c in sorted(pair.components(quantities))]
            else:
                out.append(pair)
        return tuple(out)


class UnsupportedRules(ValueError):
    """Options whose outcome depends on more than the file (verify refuses them plainly)."""


def parse_pairs(text: str) -> tuple[Pair, ...]:
    pairs = []
    for item in text.split(","):
        if not item.strip():
            continue
        parts = [p.strip() for p in item.split(":")]
        if len(parts) not in (2, 3) or parts[-1] == "":
            raise ValueError(f"JOIN_PAIRS: {item!r} is not left:right[:result]")
        stars = (parts[0].count("*"), parts[1].count("*"))
        if stars not in ((0, 0), (1, 1)):
            raise ValueError(f"JOIN_PAIRS: {item!r}: a pattern pair has one '*' in each name")
        if len(parts) == 3 and parts[2] not in RESULT_NAMES:
            raise ValueError(f"JOIN_PAIRS: unknown result {parts[2]!r}")
        pairs.append(Pair(*parts))
    return tuple(pairs)


def parse_windows(tumbling: str, sliding: str, session_gap: str) -> tuple[Window, ...]:
    out: list[Window] = []
    for kind, text in (("tumbling", tumbling), ("sliding", sliding), ("session", session_gap)):
        if text.strip().lower() in OFF:
            continue
        for item in (i.strip() for i in text.split(",")):
            if not item or item.lower() in OFF:
                continue
            if kind == "sliding":
                size, _, slide = item.partition("/")
                out.append(Window(kind, parse_duration_ms(size), parse_duration_ms(slide)))
            else:
                size_ms = parse_duration_ms(item)
                out.append(Window(kind, size_ms, size_ms))
    return tuple(out)


def parse_stats(text: str) -> tuple[tuple[str, str], tuple[str, str], str] | None:
    """OPSTATS_POWER: LEFT:RIGHT[:result], one ``*`` in each name; empty: off."""
    if not text.strip():
        return None
    parts = [p.strip() for p in text.split(":")]
    if len(parts) not in (2, 3) or any(p.count("*") != 1 for p in parts[:2]):
        raise ValueError(f"OPSTATS_POWER: {text!r} is not LEFT:RIGHT[:result], one * in each")
    result = parts[2] if len(parts) == 3 else "mechanical_power"
    if result not in RESULT_NAMES:
        raise ValueError(f"OPSTATS_POWER: unknown result {result!r}")
    left, right = (tuple(p.split("*")) for p in parts[:2])
    return (left[0], left[1]), (right[0], right[1]), result


def stats_rules_of(settings: SinglePassSettings) -> StatsRules | None:
    parsed = parse_stats(settings.opstats_power)
    if parsed is None:
        return None
    timeout = duration_ms(settings.opstats_partner_timeout)
    return StatsRules(
        *parsed,
        cycle_ms=duration_ms(settings.opstats_cycle),
        hold_ms=duration_ms(settings.opstats_max_hold),
        partner_timeout_ms=timeout or None,
        ratings=read_ratings(settings.machine_catalogue),
        overload_after_ms=duration_ms(settings.opstats_overload_time) or None,
    )


def rules_of(settings: SinglePassSettings) -> Rules:
    """The rules of a single-pass job (the two-jobs shape reads the same variables)."""
    if settings.allowed_disorder or settings.partner_timeout:
        raise UnsupportedRules(
            "verify models the join's default late policy only: JOIN_ALLOWED_DISORDER and "
            "JOIN_PARTNER_TIMEOUT must be off (with them, which records join depends on how "
            "the streams interleaved, not on the file alone)"
        )
    return Rules(
        pairs=parse_pairs(settings.pairs),
        max_gap_ms=duration_ms(settings.max_gap) or None,
        windows=parse_windows(settings.tumbling, settings.sliding, settings.session_gap),
        lateness_ms=duration_ms(settings.allowed_lateness),
        stats=stats_rules_of(settings),
    )
