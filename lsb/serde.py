"""JoinState <-> bytes in the operators' one versioned state encoding (``operators.codec``).

Fields of kind ``join``::

    n_quantities:u32, per quantity: name, last:i64, max_seen:i64,
                      held times i64[], held values f64[]   (heap order, kept as is)
    n_pairs:u32,      per pair: left name, right name,
                      left times i64[], left values f64[], right times i64[], right values f64[]
    deadline:i64?, last call:i64                            (version 3 on; before: none, never)

Entries are matched to the config by name on restore, so adding a pair to the config keeps the
state of the others; entries the config no longer has are dropped. With pattern pairs the
names also say which components the state was kept for (``lsb.plan``).
"""

from __future__ import annotations

from dataclasses import dataclass

from operators.codec import Reader, Writer

from .config import NO_TIME, JoinConfig
from .state import JoinState, PairState, QuantityState, SideBuffer

KIND = "join"


def write_state(state: JoinState, config: JoinConfig, out: Writer) -> None:
    out.count(len(state.quantities))
    for name, qs in zip(config.quantities, state.quantities, strict=False):
        out.text(name)
        out.int64(qs.last)
        out.int64(qs.max_seen)
        out.ints([h[0] for h in qs.held])
        out.floats([h[1] for h in qs.held])
    out.count(len(state.pairs))
    for spec, ps in zip(config.pairs, state.pairs, strict=False):
        out.text(spec.left)
        out.text(spec.right)
        for side in (ps.left, ps.right):
            out.ints(side.times)
            out.floats(side.values)
    out.optional_int64(state.deadline_ms)
    out.int64(state.last_call_ms)


@dataclass
class Entries:
    """A state's fields by name, before they are matched to a config."""

    quantities: dict[str, QuantityState]
    pairs: dict[tuple[str, str], PairState]
    deadline_ms: int | None = None
    last_call_ms: int = NO_TIME

    @classmethod
    def of(cls, state: JoinState, config: JoinConfig) -> Entries:
        """The entries of ``state``, aligned with ``config``."""
        return cls(
            dict(zip(config.quantities, state.quantities, strict=True)),
            {(p.left, p.right): ps for p, ps in zip(config.pairs, state.pairs, strict=True)},
            state.deadline_ms,
            state.last_call_ms,
        )

    def state(self, config: JoinConfig) -> JoinState:
        state = JoinState.empty(config)
        state.deadline_ms, state.last_call_ms = self.deadline_ms, self.last_call_ms
        for name, qs in self.quantities.items():
            code = config.quantity_code(name)
            if code >= 0:
                state.quantities[code] = qs
        index = {(p.left, p.right): k for k, p in enumerate(config.pairs)}
        for names, ps in self.pairs.items():
            k = index.get(names)
            if k is not None:
                state.pairs[k] = ps
        return state


def read_entries(data: Reader) -> Entries:
    quantities = {}
    for _ in range(data.count()):
        name = data.text()
        last, max_seen = data.int64(), data.int64()
        times, values = data.ints().tolist(), data.floats().tolist()
        quantities[name] = QuantityState(last, list(zip(times, values, strict=False)), max_seen)
    pairs = {}
    for _ in range(data.count()):
        left, right = data.text(), data.text()
        sides = [SideBuffer(data.ints().tolist(), data.floats().tolist()) for _ in range(2)]
        pairs[(left, right)] = PairState(*sides)
    if data.version < 3:
        return Entries(quantities, pairs)
    return Entries(quantities, pairs, data.optional_int64(), data.int64())


def read_state(data: Reader, config: JoinConfig) -> JoinState:
    return read_entries(data).state(config)


def to_bytes(state: JoinState, config: JoinConfig) -> bytes:
    """Serialize; restoring with :func:`from_bytes` gives an identical state."""
    out = Writer(KIND)
    write_state(state, config, out)
    return out.finish()


def from_bytes(data: bytes | bytearray | memoryview, config: JoinConfig) -> JoinState:
    """Inverse of :func:`to_bytes` (for the given config); StateFormatError (a ValueError) for
    bytes that are not a join state, StateVersionError for one of a newer release."""
    reader = Reader(data, KIND)
    state = read_state(reader, config)
    reader.done()
    return state


def coerce_state(
    state: JoinState | bytes | bytearray | memoryview | None, config: JoinConfig
) -> JoinState:
    """Accept a state object, its serialized form, or None (fresh key)."""
    if state is None:
        return JoinState.empty(config)
    if isinstance(state, JoinState):
        return state
    if len(state) == 0:
        return JoinState.empty(config)
    return from_bytes(bytes(state), config)
