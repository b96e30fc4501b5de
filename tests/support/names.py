"""Hypothesis strategies for Thing and quantity names (streamkit.identifiers): valid ones,
rich in what the line protocol escapes, and each kind of invalid one with its expected detail."""

from __future__ import annotations

from hypothesis import strategies as st

from streamkit.identifiers import MAX_CHARS, is_quantity, is_thing

#: Printable characters (no category C or Z) plus what the line protocol and humans find
#: tricky but the rule allows: inner spaces, commas, equal signs, quotes, colons.
things = st.text(
    st.characters(blacklist_characters="|\\/+#", blacklist_categories=("C", "Z"))
    | st.sampled_from(" ,=\"':.-_"),
    min_size=1,
    max_size=MAX_CHARS,
).filter(is_thing)
quantities = st.text(
    st.characters(blacklist_characters="|\\", blacklist_categories=("C", "Z"))
    | st.sampled_from(" ,=\"':.-_/+#"),
    min_size=1,
    max_size=MAX_CHARS,
).filter(is_quantity)

#: A character no name may hold: control, format, surrogate, private use, line and paragraph
#: separators, non-ASCII spaces.
unprintable = st.characters(
    whitelist_categories=("Cc", "Cf", "Cs", "Co", "Zl", "Zp")
) | st.sampled_from("\u00a0\u2000\u3000\t\n\r\x00\x7f\x85\ufeff")


@st.composite
def spoiled(draw: st.DrawFn, valid: st.SearchStrategy[str], forbidden: str) -> tuple[str, str]:
    """(a name made invalid, a word its detail holds): one bad character inserted, padded with a
    space, empty, or too long."""
    name = draw(valid)[: MAX_CHARS - 2].rstrip(" ")  # room for one more character or two spaces
    how = draw(st.sampled_from(["char", "forbidden", "pad", "empty", "long"]))
    at = draw(st.integers(0, len(name)))
    if how == "char":
        return name[:at] + draw(unprintable) + name[at:], "U+"
    if how == "forbidden":
        return name[:at] + draw(st.sampled_from(forbidden)) + name[at:], "holds"
    if how == "pad":
        return draw(st.sampled_from([" " + name, name + " ", " " + name + " "])), "space"
    if how == "empty":
        return "", "empty"
    return (name * (MAX_CHARS // len(name) + 1))[
        : MAX_CHARS + draw(st.integers(1, 50))
    ], "characters long"


bad_things = spoiled(things, "|\\/+#")
bad_quantities = spoiled(quantities, "|\\")
