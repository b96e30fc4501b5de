"""A thing's operation-statistics state <-> bytes in the one state encoding
(``operators.codec``).

Fields of kind ``operation-statistics``, per component in name order::

    name, rating id, last times i64[2], last values f64[2],
    per input: pending times i64[], values f64[], row ids texts,
    held times i64[2], held values f64[2], cursor:i64, power:f64[1],
    open cycle (count 0 or 1; then start:i64, band ms i64[], data ms:i64,
    motoring, regenerative and peak f64[3]), cumulative band ms i64[],
    flushed until:i64, last call:i64, deadline:optional i64,
    firing since:i64 (from version 2; before: none firing)
"""

from __future__ import annotations

from operators.codec import Reader, Writer
from opstats.cycles import OpenCycle
from opstats.signal import ComponentState

KIND = "operation-statistics"


def write_state(state: dict[str, ComponentState], out: Writer) -> None:
    out.count(len(state))
    for name in sorted(state):
        s = state[name]
        out.text(name)
        out.text(s.rating_id)
        out.ints(s.last_t)
        out.floats(s.last_v)
        for side in (0, 1):
            out.ints(s.pend_t[side])
            out.floats(s.pend_v[side])
            out.texts(s.pend_id[side])
        out.ints(s.held_t)
        out.floats(s.held_v)
        out.int64(s.cursor)
        out.floats([s.power_w])
        cycle = s.cycle
        out.count(0 if cycle is None else 1)
        if cycle is not None:
            out.int64(cycle.start_ms)
            out.ints(cycle.band_ms)
            out.int64(cycle.data_ms)
            out.floats([cycle.motoring_wms, cycle.regenerative_wms, cycle.peak_w])
        out.ints(s.cumulative_ms)
        out.int64(s.flushed_until)
        out.int64(s.last_call_ms)
        out.optional_int64(s.deadline_ms)
        out.int64(s.firing_since_ms)


def read_state(data: Reader) -> dict[str, ComponentState]:
    state = {}
    for _ in range(data.count()):
        name = data.text()
        s = ComponentState(data.text())
        s.last_t, s.last_v = data.ints().tolist(), data.floats().tolist()
        for side in (0, 1):
            s.pend_t[side] = data.ints().tolist()
            s.pend_v[side] = data.floats().tolist()
            s.pend_id[side] = data.texts()
        s.held_t, s.held_v = data.ints().tolist(), data.floats().tolist()
        s.cursor = data.int64()
        (s.power_w,) = data.floats().tolist()
        if data.count():
            start, bands, data_ms = data.int64(), data.ints().tolist(), data.int64()
            motoring, regenerative, peak = data.floats().tolist()
            s.cycle = OpenCycle(start, bands, data_ms, motoring, regenerative, peak)
        s.cumulative_ms = data.ints().tolist()
        s.flushed_until = data.int64()
        s.last_call_ms = data.int64()
        s.deadline_ms = data.optional_int64()
        if data.version >= 2:
            s.firing_since_ms = data.int64()
        state[name] = s
    return state
