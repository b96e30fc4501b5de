"""Sizes in settings ('64k', '1m', '2g', or bytes): parsed when settings load, held as bytes.

Binary multiples throughout (k = 1024), as the JVM and Spark read '2g', so one size text
means the same to our services and to the Spark workers the launcher starts.
"""

from __future__ import annotations

import re
from typing import NewType

#: A size in bytes; a distinct type so the settings loader knows to accept '64k', '2g'.
ByteSize = NewType("ByteSize", int)

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
MAX_SIZE = 1 << 50  # a petabyte: more is a typo, not a setting


def parse_size(text: str) -> ByteSize:
    """'1048576', '64k', '64KiB', '1m', '2g' (binary multiples) -> bytes; at least 1."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text!r} (e.g. 65536, 64k, 1m, 2g)")
    size = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if not 0 < size <= MAX_SIZE:
        raise ValueError(f"size out of range: {text[:40]!r} (1 byte to {MAX_SIZE} bytes)")
    return ByteSize(size)


def format_size(size: int) -> str:
    """The inverse of :func:`parse_size` in the largest unit that divides it ('2g', '64k'),
    which is also how Spark and the JVM read it."""
    for unit in ("t", "g", "m", "k"):
        if size and size % _UNITS[unit] == 0:
            return f"{size // _UNITS[unit]}{unit}"
    return str(size)
