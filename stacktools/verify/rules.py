"""The stages' options the expectation needs, read from the same configuration the Spark job
reads (JOIN_*, AGGREGATE_* from the command line, the environment, .env), parsed here again:
only their text is shared with the pipeline, not its parser."""

from __future__ import annotations

from dataclasses import dataclass

from spark_jobs.config import SinglePassSettings
from streamkit.durations import duration_ms, parse_duration_ms

#: The join's result functions, from their definitions in docs/join.md.
RESULT_NAMES = ("mechanical_power", "product", "difference")
OFF = {"", "off", "none"}


@dataclass(frozen=True)
class Pair:
    left: str
    right: str
    result_name: str = "mechanical_power"

    @property
    def tag(self) -> str:
        return f"{self.left}:{self.right}"


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
class Rules:
    pairs: tuple[Pair, ...]
    max_gap_ms: int | None
    windows: tuple[Window, ...]
    lateness_ms: int


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


def rules_of(settings: SinglePassSettings) -> Rules:
    """The rules of a single-pass job (the two-jobs shape reads the same variables)."""
    if settings.allowed_disorder_ms or settings.partner_timeout_ms:
        raise UnsupportedRules(
            "verify models the join's default late policy only: JOIN_ALLOWED_DISORDER_MS and "
            "JOIN_PARTNER_TIMEOUT_MS must be 0 (with them, which records join depends on how "
            "the streams interleaved, not on the file alone)"
        )
    return Rules(
        pairs=parse_pairs(settings.pairs),
        max_gap_ms=settings.max_gap_ms or None,
        windows=parse_windows(settings.tumbling, settings.sliding, settings.session_gap),
        lateness_ms=duration_ms(settings.allowed_lateness),
    )
