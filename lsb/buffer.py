"""Many keys in one object, for offline use and tests (Spark keeps keys apart itself)."""

from __future__ import annotations

from .batch import BatchResult, process_batch
from .config import JoinConfig
from .record import StepResult, flush_state, process_record
from .serde import from_bytes, to_bytes
from .state import JoinState


class LocalStreamBuffer:
    """Holds a :class:`JoinState` per key; both paths may be mixed freely."""

    def __init__(self, config: JoinConfig) -> None:
        self.config = config
        self.states: dict[str, JoinState] = {}

    def state(self, key: str) -> JoinState:
        st = self.states.get(key)
        if st is None:
            st = self.states[key] = JoinState.empty(self.config)
        return st

    def push(self, key: str, quantity: str, time: int, value: float, index: int = -1) -> StepResult:
        return process_record(self.config, key, self.state(key), quantity, time, value, index)

    def push_batch(
        self, key: str, quantities: object, times: object, values: object
    ) -> BatchResult:
        res = process_batch(self.config, self.state(key), quantities, times, values)
        self.states[key] = res.state
        return res

    def flush(self, key: str) -> StepResult:
        return flush_state(self.config, key, self.state(key))

    def snapshot(self, key: str) -> bytes:
        return to_bytes(self.state(key), self.config)

    def restore(self, key: str, data: bytes) -> None:
        self.states[key] = from_bytes(data, self.config)
