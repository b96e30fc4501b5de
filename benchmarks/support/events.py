"""The generated events files the benchmarks replay: one per size, cached across runs (the
full-size file takes minutes to generate), and a head of one for shorter replays."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

from simulator.generate import generate
from streamkit.paths import CACHE_DIR, REPO_ROOT


def events_file(rows: int, things: int) -> Path:
    """The cached file of ``rows`` generated rows of ``things`` Things (seed 1), made once."""
    path = CACHE_DIR / f"events-{rows}-{things}.json"
    if not path.exists():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        with partial.open("w") as handle:
            for index, row in enumerate(generate(rows, things, seed=1)):
                handle.write(json.dumps(row) + "\n")
                if index % 200_000 == 0:
                    print(f"  generating {path.name}: {index:,}/{rows:,} rows", flush=True)
        partial.rename(path)
    return path


def head(path: Path, rows: int, work: Path) -> Path:
    """The first ``rows`` lines of ``path`` as a file in ``work``."""
    out = work / f"head-{rows}.json"
    with path.open("rb") as source, out.open("wb") as target:
        target.writelines(itertools.islice(source, rows))
    return out


def write_events(path: Path, rows: int, things: int = 8) -> None:
    """A generated file written by the simulator's own command, as a user would make one."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "simulator.generate",
            "-o",
            str(path),
            "--rows",
            str(rows),
            "--things",
            str(things),
            "--no-progress",
        ],
        cwd=REPO_ROOT,
        check=True,
    )
