"""A key's records of one micro-batch as numpy columns in arrival order: what the state
functions work on. Taken from Spark's pandas frames once per call; every later step (the join,
each quantity's windows) slices arrays instead of frames, which costs a fraction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class KeyRecords:
    quantity: np.ndarray  #: object (str)
    event_time_ms: np.ndarray  #: int64
    value: np.ndarray  #: float64
    row_id: np.ndarray  #: object (str)

    @classmethod
    def arrival_order(cls, frames: Iterable[pd.DataFrame]) -> KeyRecords:
        """The frames' rows by (Kafka partition, offset): a thing lives in one partition, so
        this is the order its records were written in."""
        import pandas as pd

        parts = list(frames)
        batch = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
        order = np.lexsort((batch["kafka_offset"].to_numpy(), batch["kafka_partition"].to_numpy()))
        return cls(
            batch["quantity"].to_numpy(dtype=object)[order],
            batch["event_time_ms"].to_numpy(dtype=np.int64)[order],
            batch["value"].to_numpy(dtype=np.float64)[order],
            batch["row_id"].to_numpy(dtype=object)[order],
        )

    def __len__(self) -> int:
        return len(self.event_time_ms)

    def take(self, rows: np.ndarray) -> KeyRecords:
        """The records at ``rows`` (a boolean mask or indices), in the same order."""
        return KeyRecords(
            self.quantity[rows], self.event_time_ms[rows], self.value[rows], self.row_id[rows]
        )

    def by_quantity(self) -> Iterable[tuple[str, KeyRecords]]:
        """Each quantity's records, in arrival order, quantities sorted."""
        names, codes = np.unique(self.quantity, return_inverse=True)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
        for k, name in enumerate(names):
            yield str(name), self.take(order[bounds[k] : bounds[k + 1]])
