"""KeyState <-> bytes, one compact binary value per key for the Spark state store.

Layout (little endian)::

    b"LSB" version:u8  n_quantities:u16  n_pairs:u16
    per quantity: name (u16 length + utf-8)  last:i64  max_seen:i64  n_held:u32
                  held times i64[n_held]  held values f64[n_held]   (heap order, kept as is)
    per pair:     left name, right name (u16 length + utf-8)  n_left:u32  n_right:u32
                  left times i64[], left values f64[], right times i64[], right values f64[]

Entries are matched to the config by name on restore, so adding a pair to the
config keeps the state of the others; entries the config no longer has are dropped.
"""

from __future__ import annotations

import struct

import numpy as np

from .config import JoinConfig
from .state import KeyState, PairState, QuantityState, SideBuffer

MAGIC = b"LSB"
VERSION = 1
_HEAD = struct.Struct("<3sBHH")
_QTY = struct.Struct("<qqI")
_PAIR = struct.Struct("<II")
_LEN = struct.Struct("<H")


def _name(buf: list[bytes], name: str) -> None:
    raw = name.encode()
    buf.append(_LEN.pack(len(raw)))
    buf.append(raw)


def to_bytes(state: KeyState, config: JoinConfig) -> bytes:
    """Serialize; restoring with :func:`from_bytes` gives an identical state."""
    out: list[bytes] = [_HEAD.pack(MAGIC, VERSION, len(state.quantities), len(state.pairs))]
    for name, qs in zip(config.quantities, state.quantities):
        _name(out, name)
        out.append(_QTY.pack(qs.last, qs.max_seen, len(qs.held)))
        if qs.held:
            out.append(np.array([h[0] for h in qs.held], dtype="<i8").tobytes())
            out.append(np.array([h[1] for h in qs.held], dtype="<f8").tobytes())
    for spec, ps in zip(config.pairs, state.pairs):
        _name(out, spec.left)
        _name(out, spec.right)
        out.append(_PAIR.pack(len(ps.left), len(ps.right)))
        for side in (ps.left, ps.right):
            if side.times:
                out.append(np.array(side.times, dtype="<i8").tobytes())
                out.append(np.array(side.values, dtype="<f8").tobytes())
    return b"".join(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def unpack(self, st: struct.Struct) -> tuple:
        vals = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return vals

    def name(self) -> str:
        (n,) = self.unpack(_LEN)
        raw = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return raw.decode()

    def array(self, dtype: str, n: int) -> list:
        if n == 0:
            return []
        arr = np.frombuffer(self.data, dtype=dtype, count=n, offset=self.pos)
        self.pos += 8 * n
        return arr.tolist()


def from_bytes(data: bytes, config: JoinConfig) -> KeyState:
    """Inverse of :func:`to_bytes` (for the given config)."""
    state = KeyState.empty(config)
    r = _Reader(data)
    magic, version, nq, npairs = r.unpack(_HEAD)
    if magic != MAGIC or version != VERSION:
        raise ValueError(f"not an LSB state (magic {magic!r}, version {version})")
    for _ in range(nq):
        name = r.name()
        last, max_seen, nheld = r.unpack(_QTY)
        times = r.array("<i8", nheld)
        values = r.array("<f8", nheld)
        code = config.quantity_code(name)
        if code >= 0:
            state.quantities[code] = QuantityState(last, list(zip(times, values)), max_seen)
    index = {(p.left, p.right): k for k, p in enumerate(config.pairs)}
    for _ in range(npairs):
        left, right = r.name(), r.name()
        nl, nr = r.unpack(_PAIR)
        lt, lv = r.array("<i8", nl), r.array("<f8", nl)
        rt, rv = r.array("<i8", nr), r.array("<f8", nr)
        k = index.get((left, right))
        if k is not None:
            state.pairs[k] = PairState(SideBuffer(lt, lv), SideBuffer(rt, rv))
    return state


def coerce_state(
    state: KeyState | bytes | bytearray | memoryview | None, config: JoinConfig
) -> KeyState:
    """Accept a state object, its serialized form, or None (fresh key)."""
    if state is None:
        return KeyState.empty(config)
    if isinstance(state, KeyState):
        return state
    if len(state) == 0:
        return KeyState.empty(config)
    return from_bytes(bytes(state), config)
