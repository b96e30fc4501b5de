"""The one naming rule (streamkit.identifiers): what passes round-trips through every key, tag
and topic made of it unchanged; what does not is refused with its reason, by the row parser,
the key reader and the topic builder alike."""

from __future__ import annotations

import json

import paho.mqtt.client as mqtt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from db_connector.lineprotocol import tag_value
from streamkit.events import RowError, parse_row
from streamkit.identifiers import MAX_CHARS, is_quantity, is_thing, quantity_problem, thing_problem
from streamkit.wire import aggregate_key, machine_topic, parse_record_key, record_key, shard_prefix
from tests.support.names import bad_quantities, bad_things, quantities, things

times = st.integers(-(2**62), 2**62)


def unescape_tag(escaped: str) -> str:
    """How InfluxDB reads a tag value back: a backslash escapes ``,``, ``=`` and space and is
    literal before anything else; an unescaped ``,``, ``=`` or space would end the value."""
    out, i = [], 0
    while i < len(escaped):
        char = escaped[i]
        if char == "\\" and i + 1 < len(escaped) and escaped[i + 1] in ", =":
            out.append(escaped[i + 1])
            i += 2
            continue
        assert char not in ", =", f"{escaped!r} ends the tag value early"
        out.append(char)
        i += 1
    return "".join(out)


def row(thing: object, quantity: object = "q") -> bytes:
    return json.dumps({"Thing": thing, "Timestamp": 1_554_000_000_000, quantity: 1.5}).encode()


@given(things, quantities, times, st.integers(0, 2**62))
def test_valid_names_round_trip_through_every_key_tag_and_topic(
    thing: str, quantity: str, time_ms: int, start_ms: int
) -> None:
    assert parse_record_key(record_key(thing, quantity, time_ms)) == (thing, quantity, time_ms)
    assert aggregate_key(thing, quantity, "sliding-60000-10000", start_ms).decode().split("|") == [
        thing,
        quantity,
        "sliding-60000-10000",
        str(start_ms),
    ]
    assert unescape_tag(tag_value(thing)) == thing and unescape_tag(tag_value(quantity)) == quantity
    for shards in (1, 3):
        topic = machine_topic("machines", thing, shards)
        assert topic.rsplit("/", 1)[1] == thing
        # one level below the shard's prefix, matched by the bridge's subscription, no wildcard
        level = shard_prefix("machines", int(topic.split("/")[1]) if shards > 1 else 0, shards)
        assert mqtt.topic_matches_sub(level + "/+", topic) and mqtt.topic_matches_sub(
            level + "/#", topic
        )
    parsed = parse_row(row(thing, quantity))
    assert (parsed.thing, list(parsed.quantities)) == (thing, [quantity])


@given(bad_things)
def test_bad_things_are_refused_everywhere(bad: tuple[str, str]) -> None:
    thing, word = bad
    problem = thing_problem(thing)
    assert problem is not None and word in problem
    with pytest.raises(RowError) as caught:
        parse_row(row(thing))
    assert caught.value.reason == "bad_thing" and word in str(caught.value)
    with pytest.raises(ValueError):
        machine_topic("machines", thing)
    with pytest.raises(ValueError):
        parse_record_key(f"{thing}|q|1".encode("utf-8", "surrogatepass"))


@given(bad_quantities)
def test_bad_quantity_names_are_refused_everywhere(bad: tuple[str, str]) -> None:
    quantity, word = bad
    problem = quantity_problem(quantity)
    assert problem is not None and word in problem
    with pytest.raises(RowError) as caught:
        parse_row(row("T1", quantity))
    assert caught.value.reason == "bad_quantity_name" and word in str(caught.value)
    with pytest.raises(ValueError):
        parse_record_key(f"T1|{quantity}|1".encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize(
    ("thing", "detail"),
    [
        ("", "empty"),
        (" M1", "space"),
        ("M1 ", "space"),
        ("M\x001", "U+0000"),
        ("M1\n", "U+000A"),
        ("M\u200b1", "U+200B"),
        ("M\u00a01", "U+00A0"),
        ("M\ud8001", "lone surrogate"),
        ("a|b", "key separator"),
        ("a/b", "topic level"),
        ("a+", "wildcard"),
        ("#", "wildcard"),
        ("a\\", "escape character"),
        ("M" * (MAX_CHARS + 1), "129 characters long"),
        (5, "not int"),
        (None, "not NoneType"),
        (["M1"], "not list"),
    ],
)
def test_each_bad_thing_says_why(thing: object, detail: str) -> None:
    assert detail in (thing_problem(thing) or "")
    assert not is_thing(thing)


@pytest.mark.parametrize(
    "name",
    [
        "R0815",
        "vaTorque_C11",
        "M" * MAX_CHARS,
        "Fräse 3",
        "a,b=c",
        'say "hi"',
        "机床-7",
        "\U0001f527 tool",
    ],
)
def test_names_the_rule_allows(name: str) -> None:
    assert is_thing(name) and is_quantity(name)


def test_a_quantity_may_hold_what_only_an_mqtt_topic_forbids() -> None:
    assert is_quantity("power/kW") and is_quantity("C#") and is_quantity("a+b")
    assert not is_thing("power/kW")


def test_a_name_is_checked_again_after_the_cache_forgets_it() -> None:
    """The valid-name cache is bounded: filling it with new names keeps every answer right."""
    for index in range(20_000):
        assert is_thing(f"M{index}")
    assert thing_problem("M1|x") is not None and is_thing("M1")


def test_unicode_is_not_normalised() -> None:
    """Two spellings of one name are two names (identities are code points)."""
    nfc, nfd = "Fr\u00e4se", "Fra\u0308se"
    assert is_thing(nfc) and is_thing(nfd)
    assert record_key(nfc, "q", 1) != record_key(nfd, "q", 1)
