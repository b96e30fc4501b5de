"""Vectorized form of the certainty rule, for a whole batch at once.

With A and B the buffered-plus-new records of one pair (each sorted, old
records first), the certain pairs of a seen set are
``{(x, next(x))} U {(prev(x), x) : w_other(prev) >= x.t}``.  The kernel
enumerates those candidates with four searchsorted calls, keeps one canonical
route per pair (so ties and pairs reachable both ways count once) and returns
the pairs certain after the batch but not before it.  Evicted records never
matter: any pair that still can become certain involves only buffered or new
records (or lies beyond the max gap and is filtered anyway), and pairs whose
neighbours were evicted evaluate identically before and after, so they
cancel.  ``tests/lsb/per_record.py`` is the per-record equivalent.
"""

from __future__ import annotations

import numpy as np

from .config import NO_TIME

_EMPTY = np.empty(0, dtype=np.intp)


def new_certain_pairs(
    ta: np.ndarray,
    na_old: int,
    tb: np.ndarray,
    nb_old: int,
    wa_old: int,
    wa_new: int,
    wb_old: int,
    wb_new: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Index arrays (into ta, tb) of the pairs that become certain in this batch.

    ``ta[:na_old]`` / ``tb[:nb_old]`` were already buffered; ``w*_old`` and
    ``w*_new`` are the side watermarks before and after the batch.
    """
    na, nb = len(ta), len(tb)
    if na == 0 or nb == 0:
        return _EMPTY, _EMPTY
    next_b = np.searchsorted(tb, ta, "left")  # first B at or after each A
    prev_b = np.searchsorted(tb, ta, "right") - 1  # last B at or before each A
    next_a = np.searchsorted(ta, tb, "left")
    prev_a = np.searchsorted(ta, tb, "right") - 1

    i1 = np.flatnonzero(next_b < nb)
    j1 = next_b[i1]
    j2 = np.flatnonzero(next_a < na)
    i2 = next_a[j2]
    keep2 = next_b[i2] != j2
    i3 = np.flatnonzero(prev_b >= 0)
    j3 = prev_b[i3]
    keep3 = (next_b[i3] != j3) & (next_a[j3] != i3)
    j4 = np.flatnonzero(prev_a >= 0)
    i4 = prev_a[j4]
    keep4 = (next_b[i4] != j4) & (next_a[j4] != i4) & (prev_b[i4] != j4)

    i = np.concatenate((i1, i2[keep2], i3[keep3], i4[keep4]))
    j = np.concatenate((j1, j2[keep2], j3[keep3], j4[keep4]))
    ti = ta[i]
    tj = tb[j]
    r1 = next_b[i] == j
    r2 = next_a[j] == i
    r3 = prev_b[i] == j
    r4 = prev_a[j] == i
    fixed = r1 | r2
    after = fixed | (r3 & (wb_new >= ti)) | (r4 & (wa_new >= tj))
    before = (i < na_old) & (j < nb_old) & (fixed | (r3 & (wb_old >= ti)) | (r4 & (wa_old >= tj)))
    emit = after & ~before
    return i[emit], j[emit]


def evict_count(
    times: np.ndarray, other_last: int, other_w: int, max_gap: int | None = None
) -> int:
    """How many head records to drop (same rule as the per-record ``evict`` in the tests)."""
    n = len(times)
    if n < 2:
        return 0
    has_successor = min(int(np.searchsorted(times, other_w, "right")) - 1, n - 1)
    c = min(has_successor, int(np.searchsorted(times, other_last, "right")))
    if max_gap is not None and other_w != NO_TIME:
        c = max(c, min(has_successor, int(np.searchsorted(times, other_w - max_gap, "left"))))
    return max(c, 0)
