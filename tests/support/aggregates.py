"""The window jobs' test side: their options for a list of window specs, measurements written
as the bridge writes them, and committed windows compared with the window oracle."""

from __future__ import annotations

import math
from collections import Counter

from stacktools.stack.settings import Settings
from streamkit.wire import AvroCodec, record_key, thing_partition
from tests.oracles.windows import Expected, Record, Spec
from tests.support.messages import key_of, value_of
from tests.support.spark import produce_committed, read_to_end


def window_args(specs: list[Spec], lateness_ms: int) -> list[str]:
    args: dict[str, list[str]] = {"tumbling": [], "sliding": [], "session": []}
    for s in specs:
        args[s.kind].append(
            f"{s.size_ms}ms" if s.kind != "sliding" else f"{s.size_ms}ms/{s.slide_ms}ms"
        )
    return [
        "--tumbling",
        ",".join(args["tumbling"]) or "off",
        "--sliding",
        ",".join(args["sliding"]) or "off",
        "--session-gap",
        ",".join(args["session"]) or "off",
        "--allowed-lateness",
        f"{lateness_ms}ms",
    ]


def produce_measurements(
    settings: Settings, topic: str, records: list[Record], partitions: int
) -> None:
    codec = AvroCodec("measurement")
    produce_committed(
        settings,
        [
            (
                topic,
                record_key(thing, quantity, t),
                codec.encode(
                    {
                        "thing": thing,
                        "quantity": quantity,
                        "event_time_ms": t,
                        "value": value,
                        "row_id": row_id,
                    }
                ),
                thing_partition(thing, partitions),
            )
            for thing, quantity, t, value, row_id in records
        ],
    )


def decoded(settings: Settings, topic: str, schema: str) -> list[tuple[bytes, dict]]:
    codec = AvroCodec(schema)
    return [(key_of(m), codec.decode(value_of(m))) for m in read_to_end(settings, topic)]


def assert_windows_equal(got: list[tuple[bytes, dict]], expected: Expected) -> None:
    keys = Counter(key for key, _ in got)
    assert max(keys.values(), default=1) == 1, (
        f"windows emitted twice: {[k for k, n in keys.items() if n > 1][:3]}"
    )
    have = {key: value for key, value in got}
    want = {"|".join(map(str, k)).encode(): v for k, v in expected.windows.items()}
    assert have.keys() == want.keys(), (
        sorted(want.keys() - have.keys())[:3],
        sorted(have.keys() - want.keys())[:3],
    )
    for key, w in want.items():
        h = have[key]
        for field in ("window_start_ms", "window_end_ms", "count", "min", "max", "closed_at_ms"):
            assert h[field] == w[field], (key, field, h[field], w[field])
        assert math.isclose(h["mean"], w["mean"], rel_tol=1e-12, abs_tol=1e-12), key
        assert (h["stddev"] is None) == (w["stddev"] is None), key
        if w["stddev"] is not None:
            assert math.isclose(h["stddev"], w["stddev"], rel_tol=1e-9, abs_tol=1e-12), key
