"""Event-time windows per (thing, quantity): the pure rules the aggregate job runs.

Spark-free (numpy only) so the rules are property-tested and benchmarked alone; the rules
themselves are documented in :mod:`windowing.windows` and ``docs/windows.md``.
"""

from windowing.windows import (
    CLOSED_REASON,
    DUPLICATE_REASON,
    END_OF_TIME,
    FUTURE_REASON,
    LATE_REASON,
    NO_TIME,
    STAGE,
    SUPERSEDED_REASON,
    KeyState,
    SetAside,
    Step,
    Superseded,
    Window,
    WindowRules,
    WindowSpec,
    flush,
    parse_windows,
    process,
    process_reference,
)

__all__ = [
    "CLOSED_REASON",
    "DUPLICATE_REASON",
    "END_OF_TIME",
    "FUTURE_REASON",
    "LATE_REASON",
    "NO_TIME",
    "STAGE",
    "SUPERSEDED_REASON",
    "KeyState",
    "SetAside",
    "Step",
    "Superseded",
    "Window",
    "WindowRules",
    "WindowSpec",
    "flush",
    "parse_windows",
    "process",
    "process_reference",
]
