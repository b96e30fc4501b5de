"""Output containers: joined pairs and handed-back (late) records.

The batch path returns columns (numpy arrays) so a Spark pandas UDF can build
its output frame without a Python loop; the per-record path returns small
named tuples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .config import JoinConfig
from .policies import REASONS
from .results import pair_id, pair_ids


class JoinedPair(NamedTuple):
    key: str
    left_quantity: str
    right_quantity: str
    left_time: int
    left_value: float
    right_time: int
    right_value: float
    result: float
    event_time: int
    #: the component a pattern pair found; empty for an explicit pair
    component: str = ""

    @property
    def id(self) -> str:
        """Deterministic id (see ``results.pair_id``), computed only when asked for."""
        return pair_id(
            self.key, self.left_quantity, self.right_quantity, self.left_time, self.right_time
        )


class LateRecord(NamedTuple):
    key: str
    quantity: str
    time: int
    value: float
    reason: str
    #: Pair name for pair-level reasons (partner timeout), else None.
    pair: str | None
    #: Index of the record in the batch it came with; -1 if from an earlier batch.
    index: int  # type: ignore[assignment]  # a field, not tuple.index


@dataclass
class PairColumns:
    """Joined pairs of one key as parallel arrays (``pair`` indexes ``config.pairs``)."""

    pair: np.ndarray
    left_time: np.ndarray
    left_value: np.ndarray
    right_time: np.ndarray
    right_value: np.ndarray
    result: np.ndarray
    event_time: np.ndarray

    def __len__(self) -> int:
        return len(self.pair)

    @classmethod
    def empty(cls) -> PairColumns:
        i, f = np.empty(0, np.int64), np.empty(0, np.float64)
        return cls(np.empty(0, np.int16), i, f, i, f, f, i)

    @classmethod
    def concat(cls, parts: list[PairColumns]) -> PairColumns:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(*(np.concatenate([getattr(p, f) for p in parts]) for f in _PAIR_FIELDS))

    def ids(self, key: str, config: JoinConfig) -> list[str]:
        """Deterministic ids (see ``results.pair_id``), in row order."""
        out: list[str] = [""] * len(self)
        for k, spec in enumerate(config.pairs):
            rows = np.flatnonzero(self.pair == k)
            if len(rows):
                ids = pair_ids(
                    key, spec.left, spec.right, self.left_time[rows], self.right_time[rows]
                )
                for r, h in zip(rows.tolist(), ids, strict=False):
                    out[r] = h
        return out

    def to_columns(self, key: str, config: JoinConfig) -> dict[str, np.ndarray]:
        """Named output columns, ready for ``pandas.DataFrame(...)`` in a Spark UDF."""
        lefts = np.array([p.left for p in config.pairs], dtype=object)
        rights = np.array([p.right for p in config.pairs], dtype=object)
        components = np.array([p.component for p in config.pairs], dtype=object)
        names = np.array([p.result_name for p in config.pairs], dtype=object)
        return {
            "key": np.full(len(self), key, dtype=object),
            "left_quantity": lefts[self.pair],
            "right_quantity": rights[self.pair],
            "left_time": self.left_time,
            "right_time": self.right_time,
            "left_value": self.left_value,
            "right_value": self.right_value,
            "result": self.result,
            "event_time": self.event_time,
            "id": np.array(self.ids(key, config), dtype=object),
            "component": components[self.pair],
            "result_name": names[self.pair],
        }

    def to_records(self, key: str, config: JoinConfig) -> list[JoinedPair]:
        specs = config.pairs
        return [
            JoinedPair(
                key, specs[p].left, specs[p].right, lt, lv, rt, rv, res, ev, specs[p].component
            )
            for p, lt, lv, rt, rv, res, ev in zip(
                self.pair.tolist(),
                self.left_time.tolist(),
                self.left_value.tolist(),
                self.right_time.tolist(),
                self.right_value.tolist(),
                self.result.tolist(),
                self.event_time.tolist(),
                strict=False,
            )
        ]


_PAIR_FIELDS = (
    "pair",
    "left_time",
    "left_value",
    "right_time",
    "right_value",
    "result",
    "event_time",
)


@dataclass
class LateColumns:
    """Records handed back instead of joined; ``reason`` indexes ``policies.REASONS``."""

    index: np.ndarray
    quantity: np.ndarray
    time: np.ndarray
    value: np.ndarray
    reason: np.ndarray
    pair: np.ndarray

    def __len__(self) -> int:
        return len(self.index)

    @classmethod
    def empty(cls) -> LateColumns:
        i = np.empty(0, np.int64)
        return cls(
            i,
            np.empty(0, np.int16),
            i,
            np.empty(0, np.float64),
            np.empty(0, np.int8),
            np.empty(0, np.int16),
        )

    def to_columns(self, key: str, config: JoinConfig) -> dict[str, np.ndarray]:
        """Named columns of the handed-back records (e.g. for the late topic)."""
        names = np.array(config.quantities, dtype=object)
        pairs = np.array([p.name for p in config.pairs] + [None], dtype=object)
        return {
            "key": np.full(len(self), key, dtype=object),
            "quantity": names[self.quantity],
            "time": self.time,
            "value": self.value,
            "reason": np.array(self.reason_names(), dtype=object),
            "pair": pairs[self.pair],  # -1 (own-stream reasons) picks the trailing None
            "index": self.index,
        }

    def reason_names(self) -> list[str]:
        return [REASONS[r] for r in self.reason.tolist()]

    def to_records(self, key: str, config: JoinConfig) -> list[LateRecord]:
        return [
            LateRecord(
                key,
                config.quantities[q],
                t,
                v,
                REASONS[r],
                config.pairs[p].name if p >= 0 else None,
                i,
            )
            for i, q, t, v, r, p in zip(
                self.index.tolist(),
                self.quantity.tolist(),
                self.time.tolist(),
                self.value.tolist(),
                self.reason.tolist(),
                self.pair.tolist(),
                strict=False,
            )
        ]
