"""An events file as records (one row's bytes and the line it starts on), whatever its format:
the one file reader of the simulator, the demo and ``verify``, so every format is read by the
same code and a rejected row can always be pointed at by its line. It is the core's input
contract, beside the row's (:mod:`streamkit.events`).

Accepted: JSON lines, or one JSON array (compact, or pretty-printed over many lines); UTF-8 with
or without a byte-order mark; LF or CRLF line ends; plain or gzip (recognised by its first two
bytes, whatever the file's name). The first character that is not white space tells a JSON
array (``[``) from JSON lines.

JSON lines stream: one line in memory at a time, a line longer than MAX_ROW_BYTES is rejected
without being held. A JSON array is read whole into memory (its text; its rows are decoded one
at a time): a pretty-printed array has no line structure to stream by, and a user's file is far
smaller than the generated full-size one, which is JSON lines.

A file that cannot be replayed at all raises EventsFileError, whose message is the one line to
show: the file and the cause.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import stat
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from streamkit.errors import EventsFileError
from streamkit.events import RowError

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
#: UTF-16 (and UTF-32 little-endian, which starts the same) byte-order marks: not UTF-8.
UTF16_BOMS = {b"\xff\xfe": "UTF-16 little-endian", b"\xfe\xff": "UTF-16 big-endian"}
#: A machine snapshot is about a kilobyte: a longer row is junk, rejected without holding it.
MAX_ROW_BYTES = 1 << 20
_CHUNK = 1 << 16
#: JSON's white space (bytes.strip() would take more, e.g. a form feed, which JSON does not).
WHITE = b" \t\n\r"
#: What a read of a damaged or truncated gzip stream raises.
_READ_ERRORS = (OSError, EOFError, zlib.error)


@dataclass(frozen=True, slots=True)
class Record:
    line: int  # where the row starts, counted from 1
    data: bytes  # a JSON line as written, or an array's element as compact JSON
    error: RowError | None = None  # refused before parsing (too long, a number no parser reads)


@dataclass(frozen=True, slots=True)
class Layout:
    gzip: bool
    bom: bool
    array: bool

    def describe(self) -> str:
        return ", ".join(
            [
                ("a JSON array" if self.array else "JSON lines"),
                *(["gzip"] if self.gzip else []),
                *(["byte-order mark"] if self.bom else []),
            ]
        )


def _refuse_os_error(path: Path, exc: OSError) -> EventsFileError:
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        return EventsFileError(path, "no such file")
    if isinstance(exc, PermissionError):
        return EventsFileError(path, "cannot be read: permission denied")
    return EventsFileError(path, f"cannot be read: {exc.strerror or exc}")


@contextmanager
def _decompressed(path: Path) -> Iterator[io.BufferedIOBase]:
    """The file's bytes, gunzipped if they are gzip; only a regular file (a FIFO would block,
    /dev/zero never end)."""
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise EventsFileError(path, "is a directory, not a file")
        if not stat.S_ISREG(mode):
            raise EventsFileError(path, "is not a regular file")
        raw = path.open("rb")
    except OSError as exc:
        raise _refuse_os_error(path, exc) from None
    with raw:
        try:
            compressed = raw.peek(2)[:2] == GZIP_MAGIC
        except OSError as exc:
            raise _refuse_os_error(path, exc) from None
        if not compressed:
            yield raw
            return
        with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
            yield unzipped


@contextmanager
def _read_errors(path: Path) -> Iterator[None]:
    """A damaged gzip or a failing disk shows only when read: still the one refusal."""
    try:
        yield
    except EventsFileError:
        raise
    except gzip.BadGzipFile as exc:
        raise EventsFileError(path, f"is not a readable gzip file: {exc}") from None
    except (EOFError, zlib.error) as exc:
        raise EventsFileError(path, f"is a damaged or truncated gzip file: {exc}") from None
    except OSError as exc:
        raise _refuse_os_error(path, exc) from None


def sniff(path: Path) -> Layout:
    """How the file is written: compression, byte-order mark, array or lines."""
    with _read_errors(path), _decompressed(path) as stream:
        head = stream.read(_CHUNK)
        for mark, name in UTF16_BOMS.items():
            if head.startswith(mark):
                raise EventsFileError(
                    path, f"is {name} text (it starts with that byte-order mark), not UTF-8"
                )
        bom = head.startswith(UTF8_BOM)
        text = head[len(UTF8_BOM) :] if bom else head
        while not text.lstrip(WHITE):
            if not (text := stream.read(_CHUNK)):
                raise EventsFileError(
                    path,
                    "is empty" if len(head) == len(UTF8_BOM) * bom else "holds only white space",
                )
        return Layout(
            gzip=isinstance(stream, gzip.GzipFile), bom=bom, array=text.lstrip(WHITE)[:1] == b"["
        )


def records(path: Path) -> Iterator[Record]:
    """Every row of the file in file order (blank lines skipped). Raises EventsFileError for a
    file that cannot be read as a whole (also part-way, e.g. a truncated gzip or a broken array)."""
    layout = sniff(path)
    with _read_errors(path), _decompressed(path) as stream:
        if layout.bom:
            stream.read(len(UTF8_BOM))
        yield from (_array_records(path, stream) if layout.array else _line_records(stream))


def _line_records(stream: io.BufferedIOBase) -> Iterator[Record]:
    line_no = 0
    while line := stream.readline(MAX_ROW_BYTES + 1):
        line_no += 1
        if len(line) > MAX_ROW_BYTES and not line.endswith(b"\n"):
            while (rest := stream.readline(MAX_ROW_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield Record(
                line_no, b"", RowError("row_too_long", f"line is longer than {MAX_ROW_BYTES} bytes")
            )
            continue
        line = line.strip()  # also the \r of CRLF
        if line:
            yield Record(line_no, line)


class _UnreadableInt:
    """An integer too long for int() (a DoS guard of Python's): kept as a marker so that one
    such row is rejected, not the whole array (json.dumps refuses it: TypeError)."""

    def __init__(self, digits: str) -> None:
        self.digits = len(digits)


def _parse_int(text: str) -> int | _UnreadableInt:
    try:
        return int(text)
    except ValueError:
        return _UnreadableInt(text)


_DECODER = json.JSONDecoder(parse_int=_parse_int)
_WHITE = WHITE.decode()


def _skip_white(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WHITE:
        pos += 1
    return pos


def _array_records(path: Path, stream: io.BufferedIOBase) -> Iterator[Record]:
    """The elements of one JSON array, each as compact JSON: loads the whole text (see the
    module's docstring). A syntax error ends the array: EventsFileError with its line."""
    data = stream.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        on_line = data.count(b"\n", 0, exc.start) + 1
        raise EventsFileError(
            path, f"is not UTF-8: invalid byte 0x{data[exc.start]:02x} on line {on_line}"
        ) from None
    del data
    line, counted = 1, 0

    def line_at(pos: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, pos)
        counted = pos
        return line

    def broken(pos: int, what: str) -> EventsFileError:
        return EventsFileError(path, f"is not a valid JSON array: {what} on line {line_at(pos)}")

    pos = _skip_white(text, 0)
    if text[pos : pos + 1] != "[":  # the file changed since sniff()
        raise broken(pos, "no '[' at the start")

    def after_the_end(pos: int) -> None:
        """At the closing ']': only white space may follow it."""
        pos = _skip_white(text, pos + 1)
        if pos < len(text):
            raise broken(pos, "text after the array's end")

    pos = _skip_white(text, pos + 1)
    if text[pos : pos + 1] == "]":
        after_the_end(pos)
        return
    while True:
        if pos >= len(text):
            raise broken(pos, "the array is not closed")
        start = line_at(pos)
        try:
            obj, end = _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise broken(exc.pos, exc.msg) from None
        except (ValueError, RecursionError) as exc:
            raise broken(pos, f"{type(exc).__name__} ({str(exc)[:80]})") from None
        if end - pos > MAX_ROW_BYTES:
            yield Record(
                start, b"", RowError("row_too_long", f"row is longer than {MAX_ROW_BYTES} bytes")
            )
        else:
            try:
                yield Record(start, json.dumps(obj).encode())
            except TypeError:
                yield Record(
                    start,
                    b"",
                    RowError("bad_number", "an integer has more digits than Python reads"),
                )
            except RecursionError:
                yield Record(
                    start,
                    b"",
                    RowError("too_deep", "row is nested deeper than the JSON encoder goes"),
                )
        pos = _skip_white(text, end)
        if text[pos : pos + 1] == ",":
            pos = _skip_white(text, pos + 1)
        elif text[pos : pos + 1] == "]":
            after_the_end(pos)
            return
        else:
            raise broken(
                pos,
                "expected ',' or ']' after a row" if pos < len(text) else "the array is not closed",
            )
