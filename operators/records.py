"""A key's records of one batch as numpy columns, in arrival order: what an operator is fed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Records:
    quantity: np.ndarray  #: object (str)
    event_time_ms: np.ndarray  #: int64
    value: np.ndarray  #: float64
    row_id: np.ndarray  #: object (str): what identifies the record downstream

    @classmethod
    def of(
        cls,
        quantity: Iterable[str],
        event_time_ms: Iterable[int],
        value: Iterable[float],
        row_id: Iterable[str],
    ) -> Records:
        return cls(
            np.asarray(list(quantity), dtype=object),
            np.asarray(list(event_time_ms), dtype=np.int64),
            np.asarray(list(value), dtype=np.float64),
            np.asarray(list(row_id), dtype=object),
        )

    @classmethod
    def empty(cls) -> Records:
        return cls.of([], [], [], [])

    def __len__(self) -> int:
        return len(self.event_time_ms)

    def take(self, rows: np.ndarray | slice) -> Records:
        """The records at ``rows`` (a boolean mask, indices or a slice), in the same order."""
        return Records(
            self.quantity[rows], self.event_time_ms[rows], self.value[rows], self.row_id[rows]
        )

    def by_quantity(self) -> Iterable[tuple[str, Records]]:
        """Each quantity's records, in arrival order, quantities sorted."""
        names, codes = np.unique(self.quantity, return_inverse=True)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
        for k, name in enumerate(names):
            yield str(name), self.take(order[bounds[k] : bounds[k + 1]])
