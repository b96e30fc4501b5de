"""Size-bounded logs for servers that write to one file for as long as they run.

The launcher hands each server its log file opened with O_APPEND, and most servers cannot be
told to reopen it. So a log over its size is rotated by copy and truncate: its content moves to
``NAME.log.1`` (older copies shift to ``.2`` ..., the oldest past ``keep`` is deleted) and the
file is truncated in place; the server's next write, being an append, lands at the new end.
What a server writes between the last read of the copy and the truncation is lost: the copy
reads until it catches up with the writer, so that is at most one instant's lines.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger("stacktools.stack.log_rotation")

#: Bytes read per step of the copy.
CHUNK = 1 << 20


def rotated(path: Path, n: int) -> Path:
    return path.with_name(f"{path.name}.{n}")


def rotate(path: Path, keep: int) -> int:
    """``path``'s content to ``path.1`` (older copies shifted, at most ``keep``), then ``path``
    truncated; returns the bytes moved."""
    rotated(path, keep).unlink(missing_ok=True)
    for n in range(keep - 1, 0, -1):
        if rotated(path, n).exists():
            rotated(path, n).rename(rotated(path, n + 1))
    moved = 0
    fd = os.open(rotated(path, 1), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with open(path, "rb") as source, os.fdopen(fd, "wb") as copy:
        while chunk := source.read(CHUNK):  # until it has caught up with the writer
            copy.write(chunk)
            moved += len(chunk)
        os.truncate(path, 0)
    return moved


def rotate_logs(directory: Path, max_bytes: int, keep: int) -> list[Path]:
    """Every ``*.log`` of ``directory`` larger than ``max_bytes`` rotated; the ones rotated."""
    done = []
    for path in sorted(directory.glob("*.log")):
        try:
            if path.stat().st_size > max_bytes:
                moved = rotate(path, keep)
                done.append(path)
                log.info("log rotated", extra={"log": str(path), "bytes": moved})
        except OSError as exc:  # a log removed meanwhile, a full disk: the next round retries
            log.warning("log not rotated", extra={"log": str(path), "error": str(exc)})
    return done
