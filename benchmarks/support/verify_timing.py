"""What both verify benchmarks share: their options, and verify timed as a user runs it."""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from simulator.generate import DEFAULT_ROWS
from tests.support.verify_records import run_verify


def bench_parser(doc: str, scratch: str) -> argparse.ArgumentParser:
    """The options both verify benchmarks take; ``scratch`` names what they load."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--things", type=int, default=100)
    parser.add_argument("--events", type=Path, help="this file instead of a generated one")
    parser.add_argument("--keep", action="store_true", help=f"keep the scratch {scratch}")
    parser.add_argument(
        "--reuse", help=f"a {scratch} an earlier --keep run loaded: time verify on it only"
    )
    return parser


def timed_verify(events: Path, source: list[str]) -> tuple[int, float, float, dict[str, Any]]:
    """verify as a user runs it (interpreter start included) against ``source`` (its options
    naming the database or the topics): exit code, wall s, its CPU s, verdict."""
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        code, printed, verdict = run_verify(events, source, Path(tmp) / "v.json", timeout_s=None)
        wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(printed[-6000:])
    return code, wall, usage.ru_utime + usage.ru_stime, verdict
