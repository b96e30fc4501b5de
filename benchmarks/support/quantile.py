"""One quantile for every benchmark, so that their p50s and p99s are comparable."""

from __future__ import annotations

from collections.abc import Sequence


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile by rank (nearest rank below), NaN when empty."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")
