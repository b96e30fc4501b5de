"""Many keys in one object, for offline use and tests (Spark keeps keys apart itself)."""

from __future__ import annotations

from .batch import BatchResult, flush, process_batch
from .config import JoinConfig
from .serde import from_bytes, to_bytes
from .state import JoinState


class LocalStreamBuffer:
    """Holds a :class:`JoinState` per key; a record at a time or many, the same batch path."""

    def __init__(self, config: JoinConfig) -> None:
        self.config = config
        self.states: dict[str, JoinState] = {}

    def state(self, key: str) -> JoinState:
        st = self.states.get(key)
        if st is None:
            st = self.states[key] = JoinState.empty(self.config)
        return st

    def push(self, key: str, quantity: str, time: int, value: float) -> BatchResult:
        """One record, as a batch of one."""
        return self.push_batch(key, [quantity], [time], [value])

    def push_batch(
        self, key: str, quantities: object, times: object, values: object
    ) -> BatchResult:
        res = process_batch(self.config, self.state(key), quantities, times, values)
        self.states[key] = res.state
        return res

    def flush(self, key: str) -> BatchResult:
        """End of stream for ``key``: every pending pair; the key starts empty again."""
        res = flush(self.config, key, self.state(key))
        self.states[key] = res.state
        return res

    def snapshot(self, key: str) -> bytes:
        return to_bytes(self.state(key), self.config)

    def restore(self, key: str, data: bytes) -> None:
        self.states[key] = from_bytes(data, self.config)
