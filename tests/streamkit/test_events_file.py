"""The simulator's one file reader: every accepted format reads the same rows, a rejected row is
counted with the line it is on, and a file that cannot be replayed is refused by the check with
its cause."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit.events_file import MAX_ROW_BYTES, EventsFileError
from streamkit.events_source import LISTED_REJECTIONS, SourceStats, check_events, read_rows

ROW = st.fixed_dictionaries(
    {
        # valid names (streamkit.identifiers): the file formats are the subject here
        "Thing": st.text(st.characters(categories=("L", "N", "Pd", "Pc")), min_size=1, max_size=8),
        "Timestamp": st.integers(1_500_000_000_000, 1_800_000_000_000),
        "speed": st.floats(allow_nan=False, allow_infinity=False, width=64),
    },
    optional={"id": st.uuids().map(str), "torque": st.integers(-(10**6), 10**6)},
)


def jsonl(rows: list[dict], end: str = "\n") -> bytes:
    return "".join(json.dumps(row) + end for row in rows).encode()


#: The same rows written every way a user may have them.
FORMATS = {
    "json lines": jsonl,
    "json array": lambda rows: json.dumps(rows).encode(),
    "pretty json array": lambda rows: json.dumps(rows, indent=2).encode(),
    "bom and crlf": lambda rows: b"\xef\xbb\xbf" + jsonl(rows, "\r\n"),
    "bom pretty array, crlf": lambda rows: (
        b"\xef\xbb\xbf" + json.dumps(rows, indent=4).replace("\n", "\r\n").encode()
    ),
    "gzip json lines": lambda rows: gzip.compress(jsonl(rows)),
    "gzip bom pretty array": lambda rows: gzip.compress(
        b"\xef\xbb\xbf" + json.dumps(rows, indent=2).encode()
    ),
}


def read(path: Path) -> tuple[list, SourceStats]:
    stats = SourceStats()
    return list(read_rows(path, stats)), stats


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(ROW, min_size=1, max_size=12))
def test_every_format_reads_the_same_rows(tmp_path: Path, rows: list[dict]) -> None:
    results = {}
    for name, write in FORMATS.items():
        path = tmp_path / f"{name.replace(' ', '-')}.events"  # no .gz: gzip is told by its bytes
        path.write_bytes(write(rows))
        assert check_events(path).rows_in_file == len(rows), name
        results[name], stats = read(path)
        assert stats.rows == len(rows) and not stats.rejected, (name, stats.listed)
    first = results["json lines"]
    assert [json.loads(row.payload) for row in first] == rows  # published as written
    for name, got in results.items():
        assert got == first, name


def pretty_array(entries: list[object]) -> tuple[bytes, list[int]]:
    """A pretty-printed array and the line each entry starts on."""
    text, starts = "[\n", []
    for index, entry in enumerate(entries):
        starts.append(text.count("\n") + 1)
        text += (
            "  "
            + json.dumps(entry, indent=2).replace("\n", "\n  ")
            + (",\n" if index < len(entries) - 1 else "\n")
        )
    return (text + "]\n").encode(), starts


BAD = st.sampled_from(
    [
        ("oops", "not_object"),
        ({"Timestamp": 1, "x": 1}, "missing_thing"),
        ({"Thing": "A", "Timestamp": 1}, "no_quantities"),
        ({"Thing": "A", "Timestamp": 1, "x": "fast"}, "bad_quantity"),
    ]
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(ROW, min_size=1, max_size=8),
    bad=BAD,
    at=st.integers(0, 8),
    blanks=st.lists(st.integers(0, 8), max_size=4),
    crlf=st.booleans(),
)
def test_a_rejected_row_is_counted_on_its_own_line(
    tmp_path: Path,
    rows: list[dict],
    bad: tuple[object, str],
    at: int,
    blanks: list[int],
    crlf: bool,
) -> None:
    entry, reason = bad
    at = min(at, len(rows))
    entries = [*rows[:at], entry, *rows[at:]]
    end = "\r\n" if crlf else "\n"
    lines = [json.dumps(e) for e in entries]
    # blank lines count as lines, as an editor shows them
    for position in sorted(blanks, reverse=True):
        lines.insert(min(position, len(lines)), "")
    bad_line = lines.index(json.dumps(entry)) + 1
    as_lines = tmp_path / "lines.json"
    as_lines.write_bytes(b"\xef\xbb\xbf" + end.join(lines).encode() + end.encode())
    array, starts = pretty_array(entries)
    as_array = tmp_path / "array.json"
    as_array.write_bytes(array)
    for path, line in ((as_lines, bad_line), (as_array, starts[at])):
        got, stats = read(path)
        assert len(got) == len(rows)
        assert stats.listed == [
            {"line": line, "reason": reason, "detail": stats.listed[0]["detail"]}
        ], path.name


def test_rejections_are_listed_up_to_the_cap_and_counted_exactly(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text(
        "".join(f'{{"Thing": "A", "Timestamp": {i}, "x": 1}}\nnot json\n' for i in range(300))
    )
    got, stats = read(path)
    assert len(got) == 300 and stats.rejected_total == 300 and stats.rejected == {"not_json": 300}
    assert len(stats.listed) == LISTED_REJECTIONS
    assert [entry["line"] for entry in stats.listed] == list(range(2, 2 * LISTED_REJECTIONS + 1, 2))


def test_a_row_too_long_or_with_an_unreadable_number_is_one_rejection_not_the_file(
    tmp_path: Path,
) -> None:
    good = '{"Thing": "A", "Timestamp": 1554096380000, "x": 1}'
    lines = tmp_path / "lines.json"
    lines.write_text(
        f'{good}\n{{"Thing": "A", "Timestamp": 1, "pad": "{"x" * MAX_ROW_BYTES}"}}\n{good}\n'
    )
    got, stats = read(lines)
    assert (
        len(got) == 2
        and stats.listed[0]["line"] == 2
        and stats.listed[0]["reason"] == "row_too_long"
    )
    array = tmp_path / "array.json"
    array.write_text(f'[{good},\n {{"Thing": "A", "Timestamp": 1, "x": {"9" * 5000}}},\n {good}]')
    got, stats = read(array)
    assert (
        len(got) == 2 and stats.listed[0]["line"] == 2 and stats.listed[0]["reason"] == "bad_number"
    )


GOOD = b'{"Thing": "A", "Timestamp": 1554096380000, "x": 1}\n'


@pytest.mark.parametrize(
    ("content", "cause"),
    [
        (b"", "is empty"),
        (b"\xef\xbb\xbf", "is empty"),
        (b"\n \r\n\t\n", "holds only white space"),
        (b"[]", "is an empty JSON array"),
        (b"[\n]\n", "is an empty JSON array"),
        (
            '{"Thing": "A", "Timestamp": 1554096380000, "x": 1}\n'.encode("utf-16"),
            "is UTF-16 little-endian text",
        ),
        (
            '{"Thing": "Mühle", "Timestamp": 1554096380000, "x": 1}\n'.encode("latin-1") * 3,
            "is not UTF-8 text: all 3 rows rejected (not_utf8 3); first: line 1",
        ),
        (
            b"Thing,Timestamp,x\nA,1554096380000,1\n",
            "is neither JSON lines nor a JSON array: all 2 rows rejected",
        ),
        (
            b'{"Timestamp": 1, "x": 1}\n{"Thing": "A", "Timestamp": 1}\n',
            "has no valid row: all 2 rows rejected (missing_thing 1, no_quantities 1); first: line "
            "1: Thing is missing",
        ),
        (
            b'[{"Thing": "A", "Timestamp": 1, "x": 1},\n {"Thing": "B" "Timestamp": 1}]',
            "is not a valid JSON array: Expecting ',' delimiter on line 2",
        ),
        (
            b'[{"Thing": "A", "Timestamp": 1, "x": 1},\n',
            "is not a valid JSON array: the array is not closed on line 2",
        ),
        (
            b'[{"Thing": "A", "Timestamp": 1, "x": 1}]\n{"Thing": "A", "Timestamp": 2, "x": 1}\n',
            "is not a valid JSON array: text after the array's end on line 2",
        ),
        (
            b'[{"Thing": "A", "Timestamp": 1, "x": 1}, "\xff"]',
            "is not UTF-8: invalid byte 0xff on line 1",
        ),
        # mtime=0: the bytes name the test, and every xdist worker must collect the same names
        (gzip.compress(GOOD * 1000, mtime=0)[:-40], "is a damaged or truncated gzip file"),
        (gzip.compress(GOOD, mtime=0) + b"junk", "is not a readable gzip file"),
    ],
)
def test_a_file_that_cannot_be_replayed_is_refused_with_its_cause(
    tmp_path: Path, content: bytes, cause: str
) -> None:
    path = tmp_path / "events.json"
    path.write_bytes(content)
    with pytest.raises(EventsFileError) as refused:
        check_events(path)
    assert str(refused.value).startswith(f"{path}: {cause}"), str(refused.value)
    assert "\n" not in str(refused.value)


def test_what_is_not_a_readable_file_is_refused_by_name(tmp_path: Path) -> None:
    causes = {
        tmp_path / "missing.json": "no such file",
        tmp_path: "is a directory, not a file",
        tmp_path / "missing" / "deeper.json": "no such file",
    }
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    causes[fifo] = "is not a regular file"  # opening it would block: refused before
    for path, cause in causes.items():
        with pytest.raises(EventsFileError, match=f"^{path}: {cause}$"):
            check_events(path)


def test_the_check_counts_rows_and_validates_only_up_to_the_first_valid_one(tmp_path: Path) -> None:
    """A bad row after a valid one is the replay's to count, not a reason to refuse the file."""
    path = tmp_path / "events.json.gz"
    path.write_bytes(gzip.compress(b"junk\n" + GOOD + b"junk\n\n" + GOOD))
    checked = check_events(path)
    assert checked.rows_in_file == 4 and checked.layout.describe() == "JSON lines, gzip"
    got, stats = read(path)
    assert len(got) == 2 and [entry["line"] for entry in stats.listed] == [1, 3]
