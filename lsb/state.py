"""The one state type shared by the per-record and the batch path.

Per key: for every quantity the last accepted (released) event time and the
records held by the reorder stage; for every pair two side buffers holding a
suffix of each stream (everything older was evicted because it can no longer
take part in a pair).  Plain lists keep the per-record path cheap; the batch
path converts to numpy on entry and back on exit (buffers are short for
in-order streams, so that costs little).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import NO_TIME, JoinConfig


@dataclass
class SideBuffer:
    """Buffered records of one side of one pair, strictly increasing in time."""

    times: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    @property
    def last(self) -> int:
        return self.times[-1] if self.times else NO_TIME

    def __len__(self) -> int:
        return len(self.times)


@dataclass
class PairState:
    left: SideBuffer = field(default_factory=SideBuffer)
    right: SideBuffer = field(default_factory=SideBuffer)


@dataclass
class QuantityState:
    """Own-stream bookkeeping of one (key, quantity) stream.

    ``last`` is the newest time that passed the late policy (left the reorder
    stage); ``held`` are records waiting in the reorder stage as a min-heap of
    (time, value).
    """

    last: int = NO_TIME
    held: list[tuple[int, float]] = field(default_factory=list)
    #: Newest time seen by the reorder stage (drives its watermark).
    max_seen: int = NO_TIME


@dataclass
class JoinState:
    """Everything the join remembers about one key."""

    quantities: list[QuantityState]
    pairs: list[PairState]
    #: The components its config holds (``JoinConfig.components``): with pattern pairs, which
    #: config the lists above are aligned with.
    components: tuple[str, ...] = ()
    #: Processing time of its idle flush (``JoinOperator``'s timer); None: none armed.
    deadline_ms: int | None = None
    #: Processing time of the last batch with its records (a timer long after it means
    #: nothing ran meanwhile: re-armed, not fired).
    last_call_ms: int = NO_TIME

    @classmethod
    def empty(cls, config: JoinConfig) -> JoinState:
        return cls(
            quantities=[QuantityState() for _ in config.quantities],
            pairs=[PairState() for _ in config.pairs],
            components=config.components,
        )

    def buffered_records(self) -> int:
        """Records held in memory (pair buffers + reorder stage); for monitoring."""
        return sum(len(p.left) + len(p.right) for p in self.pairs) + sum(
            len(q.held) for q in self.quantities
        )

    def is_empty(self) -> bool:
        return self.buffered_records() == 0 and all(q.last == NO_TIME for q in self.quantities)
