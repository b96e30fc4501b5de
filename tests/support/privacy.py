"""Who may read what the stack leaves on disk."""

from __future__ import annotations

import stat
from pathlib import Path

#: A directory no one else may list, change or enter; a file no one else may read or change.
#: A file's execute bits alone give nothing away: Spark marks the jars and files it hands an
#: executor a+x (Utils.fetchFile), and without the read bit no one else can read them.
OTHERS_DIRECTORY = 0o077
OTHERS_FILE = 0o066


def exposed(root: Path) -> list[str]:
    """Every file and directory under ``root`` (itself included) that its group or other users
    may read or change (a directory: also enter), as ``mode path`` lines; symbolic links are not
    followed (their own mode means nothing)."""
    found = []
    for path in [root, *sorted(root.rglob("*"))]:
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:  # a server's temporary file, gone meanwhile
            continue
        if stat.S_ISLNK(mode):
            continue
        if mode & (OTHERS_DIRECTORY if stat.S_ISDIR(mode) else OTHERS_FILE):
            found.append(f"{stat.filemode(mode)} {path}")
    return found
