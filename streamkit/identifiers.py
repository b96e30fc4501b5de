"""What a Thing or quantity name may be: one rule, checked where names enter the pipeline (the
bridge's row parser) and again by every stage that builds a key, tag or topic from a name it
did not make itself (the DB connector's tags, the simulator's MQTT topics).

A name becomes part of a Kafka key (``thing|quantity|...``), an InfluxDB tag value and, for a
Thing, an MQTT topic level (``<prefix>/<thing>``). A valid name is a ``str`` that

- is 1 to :data:`MAX_CHARS` (128) characters long (code points; at most 512 UTF-8 bytes);
- is printable (``str.isprintable``): no control, format, private-use, unassigned or
  surrogate character, no separator but the ASCII space (so it is always UTF-8 text);
- neither starts nor ends with a space (InfluxDB and humans would not tell them apart);
- holds none of ``|`` (the Kafka key separator, so keys split back unambiguously) and ``\\``
  (line protocol's escape character: ``\\`` before an escaped ``,``/``=``/space would end the
  tag); a Thing also none of ``/``, ``+``, ``#`` (an MQTT topic level and the wildcards).

Commas, equal signs, inner spaces and quotes are allowed: the line protocol escapes them.
Names are not Unicode-normalised: they are identities, compared code point by code point
(normalising would silently merge or rename machines), so NFC and NFD spellings are two names;
producers should send NFC. "Printable" follows the Unicode database of the Python that runs
the check, so a character assigned in a newer Unicode version is refused until Python knows it.
The row id is not a name (a field, never a key or tag): any UTF-8 text (streamkit.events).
"""

from __future__ import annotations

MAX_CHARS = 128
THING = "Thing"
QUANTITY = "quantity name"
BAD_THING = "bad_thing"
BAD_QUANTITY_NAME = "bad_quantity_name"

#: Why each forbidden character is forbidden (the dead letter's detail says it).
_WHY = {
    "|": "the Kafka key separator",
    "\\": "the line protocol's escape character",
    "/": "the MQTT topic level separator",
    "+": "an MQTT wildcard",
    "#": "an MQTT wildcard",
}
#: Valid names seen, so the hot path checks a repeated name with one set lookup. Bounded:
#: emptied when full (names come from outside; a real fleet has a few thousand).
_CACHE_LIMIT = 16_384


class _Rule:
    """The rule for one kind of name: what it forbids beyond the common part, its reason code."""

    __slots__ = ("field", "reason", "forbidden", "_valid")

    def __init__(self, field: str, reason: str, forbidden: str) -> None:
        self.field, self.reason, self.forbidden = field, reason, forbidden
        self._valid: set[str] = set()

    def problem(self, name: object) -> str | None:
        """None for a valid name, else why it is not (the dead letter's detail). A cheap set
        lookup for a name seen before; a new name is checked once."""
        if name.__class__ is str and name in self._valid:
            return None
        detail = self._check(name)
        if detail is None:
            if len(self._valid) >= _CACHE_LIMIT:
                self._valid.clear()
            self._valid.add(name)  # type: ignore[arg-type]  # a str: _check passed
        return detail

    def _check(self, name: object) -> str | None:
        field = self.field
        if not isinstance(name, str):
            return f"{field} must be a string, not {type(name).__name__}"
        if not name:
            return f"{field} is empty"
        if len(name) > MAX_CHARS:
            return f"{field} {name[:40]!r}... is {len(name)} characters long (at most {MAX_CHARS})"
        if not name.isprintable():
            char = next(c for c in name if not c.isprintable())
            what = (
                "a lone surrogate (not UTF-8)" if "\ud800" <= char <= "\udfff" else "not printable"
            )
            return f"{field} {name[:40]!r} holds U+{ord(char):04X}, {what}"
        if name[0] == " " or name[-1] == " ":
            return f"{field} {name[:40]!r} starts or ends with a space"
        for char in self.forbidden:
            if char in name:
                return f"{field} {name[:40]!r} holds {char!r}, {_WHY[char]}"
        return None


_THING = _Rule(THING, BAD_THING, "|\\/+#")
_QUANTITY = _Rule(QUANTITY, BAD_QUANTITY_NAME, "|\\")

#: None for a valid Thing, else the detail of why not; its reason code is BAD_THING.
thing_problem = _THING.problem
#: None for a valid quantity name, else the detail of why not; its reason code is BAD_QUANTITY_NAME.
quantity_problem = _QUANTITY.problem


def is_thing(name: object) -> bool:
    return thing_problem(name) is None


def is_quantity(name: object) -> bool:
    return quantity_problem(name) is None
