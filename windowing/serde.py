"""WindowState <-> bytes in the operators' one versioned state encoding (``operators.codec``).

Fields of kind ``windows``: clock:i64, horizon:i64, times i64[], values f64[], row ids (texts),
last_batch:i64, deadline (optional i64).
"""

from __future__ import annotations

from operators.codec import Reader, Writer
from windowing.windows import WindowState

KIND = "windows"


def write_state(state: WindowState, out: Writer) -> None:
    out.int64(state.clock_ms)
    out.int64(state.horizon_ms)
    out.ints(state.times)
    out.floats(state.values)
    out.texts(state.row_ids)
    out.int64(state.last_batch_ms)
    out.optional_int64(state.deadline_ms)


def read_state(data: Reader) -> WindowState:
    return WindowState(
        clock_ms=data.int64(),
        horizon_ms=data.int64(),
        times=data.ints(),
        values=data.floats(),
        row_ids=data.texts(),
        last_batch_ms=data.int64(),
        deadline_ms=data.optional_int64(),
    )


def to_bytes(state: WindowState) -> bytes:
    out = Writer(KIND)
    write_state(state, out)
    return out.finish()


def from_bytes(data: bytes | bytearray | memoryview) -> WindowState:
    """Inverse of :func:`to_bytes`; StateFormatError / StateVersionError (ValueErrors) for
    bytes that are not a windows state or come from a newer release."""
    reader = Reader(data, KIND)
    state = read_state(reader)
    reader.done()
    return state
