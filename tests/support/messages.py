"""A consumed Kafka record's parts, typed: confluent-kafka types key, value and headers as
optional (a consumed message may be an error event or a tombstone). The tests read only real
records, so a missing part fails the test here with the message it came from."""

from __future__ import annotations

from confluent_kafka import Message


def key_of(message: Message) -> bytes:
    k = message.key()
    assert isinstance(k, bytes), f"record without a key: {message.topic()} {message.offset()}"
    return k


def value_of(message: Message) -> bytes:
    v = message.value()
    assert isinstance(v, bytes), f"record without a value: {message.topic()} {message.offset()}"
    return v


def header_of(message: Message, name: str) -> bytes:
    """The value of header ``name`` (the last, if it repeats)."""
    found = dict(message.headers() or [])[name]
    assert isinstance(found, bytes), f"header {name} of {message.topic()}: {found!r}"
    return found


def headers_of(message: Message) -> dict[str, bytes]:
    """Every header by name (a later one wins, as in ``dict``)."""
    found = message.headers()
    assert found is not None, f"record without headers: {message.topic()} {message.offset()}"
    headers: dict[str, bytes] = {}
    for name, value in found.items() if isinstance(found, dict) else found:
        assert isinstance(value, bytes), f"header {name} of {message.topic()}: {value!r}"
        headers[name] = value
    return headers
