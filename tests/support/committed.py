"""What a committed output topic holds, decoded into the shape its oracle produces."""

from __future__ import annotations

from collections import Counter

from stacktools.stack.settings import Settings
from streamkit.kafka_io import read_to_end
from streamkit.wire import AvroCodec
from tests.support.messages import key_of, value_of


def committed_pairs(settings: Settings, topic: str) -> Counter:
    """The joined topic's pairs, (thing, left quantity, right quantity, left t, right t), as a
    multiset; every record's key must be its pair id."""
    codec = AvroCodec("joined")
    pairs: Counter = Counter()
    for message in read_to_end(settings, topic):
        r = codec.decode(value_of(message))
        assert key_of(message).decode() == r["id"], (message.key(), r["id"])
        pairs[
            (
                r["thing"],
                r["left_quantity"],
                r["right_quantity"],
                r["left_time_ms"],
                r["right_time_ms"],
            )
        ] += 1
    return pairs
