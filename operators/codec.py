"""The one state encoding of every keyed operator: a versioned envelope around plain fields.

Layout (little endian)::

    b"KOS"  version:u8  kind:u8 length + ascii   body

The body is a sequence of fields written by :class:`Writer` and read back in the same order by
:class:`Reader`: integers (i64), optional integers, texts, lists of texts, int64 and float64
arrays, nested byte strings (a composed operator nests its parts' snapshots). Numbers are
stored as their bits, so a restored state is bit for bit the state that was written.

Versioning rule: :data:`VERSION` is raised whenever the body of any kind changes; a reader
reads every version up to its own (an operator branches on :attr:`Reader.version` where an
old layout differs) and refuses a newer one with :class:`StateVersionError`. So a checkpoint
written by one release is read by the next, and never misread by an older one.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from operators.errors import StateFormatError, StateVersionError

MAGIC = b"KOS"
#: The layout written by this release; readers accept 1..VERSION.
VERSION = 3

_HEAD = struct.Struct("<3sBB")
_I64 = struct.Struct("<q")
_U32 = struct.Struct("<I")
_FLAG = struct.Struct("<B")


class Writer:
    """Collects the fields of one snapshot; :meth:`finish` returns the bytes."""

    def __init__(self, kind: str) -> None:
        raw = kind.encode("ascii")
        if not 0 < len(raw) < 256:
            raise ValueError(f"a state kind needs 1..255 ascii characters, got {kind!r}")
        self.parts: list[bytes] = [_HEAD.pack(MAGIC, VERSION, len(raw)), raw]

    def int64(self, value: int) -> None:
        self.parts.append(_I64.pack(value))

    def optional_int64(self, value: int | None) -> None:
        if value is None:
            self.parts.append(_FLAG.pack(0))
        else:
            self.parts += (_FLAG.pack(1), _I64.pack(value))

    def count(self, value: int) -> None:
        self.parts.append(_U32.pack(value))

    def blob(self, value: bytes) -> None:
        self.parts += (_U32.pack(len(value)), value)

    def text(self, value: str) -> None:
        self.blob(value.encode())

    def texts(self, values: Sequence[str]) -> None:
        """Many texts at once: their byte lengths as one array, then their bytes."""
        encoded = [v.encode() for v in values]
        self.count(len(encoded))
        if encoded:
            self.parts.append(np.fromiter(map(len, encoded), "<u4", len(encoded)).tobytes())
            self.parts.append(b"".join(encoded))

    def ints(self, values: Sequence[int] | np.ndarray) -> None:
        array = np.asarray(values, dtype="<i8")
        self.parts += (_U32.pack(len(array)), array.tobytes())

    def floats(self, values: Sequence[float] | np.ndarray) -> None:
        array = np.asarray(values, dtype="<f8")
        self.parts += (_U32.pack(len(array)), array.tobytes())

    def finish(self) -> bytes:
        return b"".join(self.parts)


def snapshot_kind(data: bytes | bytearray | memoryview) -> str | None:
    """The kind of operator whose snapshot ``data`` is, or None when it is no snapshot."""
    head = bytes(data[: _HEAD.size + 255])
    if len(head) < _HEAD.size or head[:3] != MAGIC:
        return None
    size = _HEAD.unpack_from(head)[2]
    return head[_HEAD.size : _HEAD.size + size].decode("ascii", "replace")


class Reader:
    """Reads the fields of a snapshot in the order they were written."""

    def __init__(self, data: bytes | bytearray | memoryview, kind: str) -> None:
        self.data = bytes(data)
        if len(self.data) < _HEAD.size or self.data[:3] != MAGIC:
            raise StateFormatError(f"not a keyed-operator state snapshot: {self.data[:8]!r}...")
        _, self.version, size = _HEAD.unpack_from(self.data)
        if self.version == 0 or self.version > VERSION:
            raise StateVersionError(
                f"state snapshot version {self.version} is not readable by this release "
                f"(it reads versions 1 to {VERSION}); it was written by a newer release: "
                "run that release, or start from a fresh checkpoint"
            )
        self.pos = _HEAD.size
        found = self._take(size).decode("ascii", "replace")
        if found != kind:
            raise StateFormatError(f"a {found!r} state snapshot where a {kind!r} one was expected")

    def _take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise StateFormatError("state snapshot cut short")
        part = self.data[self.pos : end]
        self.pos = end
        return part

    def _unpack(self, fmt: struct.Struct) -> int:
        (value,) = fmt.unpack(self._take(fmt.size))
        return int(value)

    def int64(self) -> int:
        return self._unpack(_I64)

    def optional_int64(self) -> int | None:
        return self._unpack(_I64) if self._unpack(_FLAG) else None

    def count(self) -> int:
        return self._unpack(_U32)

    def blob(self) -> bytes:
        return self._take(self.count())

    def text(self) -> str:
        return self.blob().decode()

    def texts(self) -> list[str]:
        n = self.count()
        if not n:
            return []
        lengths = np.frombuffer(self._take(4 * n), "<u4")
        ends = np.cumsum(lengths, dtype=np.int64)
        raw = self._take(int(ends[-1]))
        bounds = zip([0, *ends[:-1].tolist()], ends.tolist(), strict=False)
        if raw.isascii():  # the usual case: one decode, then slices
            joined = raw.decode("ascii")
            return [joined[a:b] for a, b in bounds]
        return [raw[a:b].decode() for a, b in bounds]

    def ints(self) -> np.ndarray:
        n = self.count()
        return np.frombuffer(self._take(8 * n), "<i8").astype(np.int64)

    def floats(self) -> np.ndarray:
        n = self.count()
        return np.frombuffer(self._take(8 * n), "<f8").astype(np.float64)

    def done(self) -> None:
        """Every field read: trailing bytes mean the snapshot was not what the reader thinks."""
        if self.pos != len(self.data):
            raise StateFormatError(f"{len(self.data) - self.pos} unread bytes in a state snapshot")
