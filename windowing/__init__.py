"""Event-time windows per (thing, quantity): the pure rules the aggregate job runs.

Spark-free (numpy only) so the rules are property-tested and benchmarked alone; the rules
themselves are documented in :mod:`windowing.windows` and ``docs/windows.md``;
:class:`WindowOperator` runs them as a keyed operator (``docs/operators.md``).
"""

from windowing.operator import WindowOperator
from windowing.serde import from_bytes, to_bytes
from windowing.windows import (
    STAGE,
    SetAside,
    Step,
    Superseded,
    Window,
    WindowRules,
    WindowSpec,
    WindowState,
    flush,
    parse_windows,
    process,
    process_reference,
)

__all__ = [
    "STAGE",
    "SetAside",
    "Step",
    "Superseded",
    "Window",
    "WindowOperator",
    "WindowRules",
    "WindowSpec",
    "WindowState",
    "flush",
    "from_bytes",
    "parse_windows",
    "process",
    "process_reference",
    "to_bytes",
]
