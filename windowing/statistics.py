"""Statistics of many windows at once, bit for bit what each window's values alone give.

A window is emitted once and final, so its floats must not depend on how it was computed.
numpy sums a 1-D array pairwise, so the bits of a sum depend on how the values are grouped,
and a flat segmented sum (``np.add.reduceat``) groups them otherwise and gives other bits.
numpy reduces each row of a C-ordered matrix as it reduces the same values as a 1-D array,
so the windows are reduced one matrix per window size: few sizes occur (a window holds about
its length times the key's rate), so a batch takes a few numpy calls per size instead of
several per window. tests/windowing/test_fast_path.py holds this against the one-window
formula.
"""

from __future__ import annotations

import numpy as np


def run_statistics(
    values: np.ndarray, firsts: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean, min, max and sample stddev (NaN for one value) of each run
    ``values[first:first + count]`` (count >= 1): as ``np.sum(run) / count``, ``run.min()``,
    ``run.max()`` and ``np.sqrt(np.sum((run - mean) ** 2) / (count - 1))``."""
    mean, low, high, stddev = (np.empty(len(firsts)) for _ in range(4))
    for n in np.unique(counts).tolist():
        which = np.flatnonzero(counts == n)
        block = values[firsts[which, None] + np.arange(n)]
        sums = np.sum(block, axis=1) / n
        mean[which], low[which], high[which] = sums, block.min(axis=1), block.max(axis=1)
        stddev[which] = (
            np.sqrt(np.sum((block - sums[:, None]) ** 2, axis=1) / (n - 1)) if n > 1 else np.nan
        )
    return mean, low, high, stddev
