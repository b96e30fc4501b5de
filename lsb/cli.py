"""Offline join: events.json lines in, one JSON line per joined pair out.

    python -m lsb --input EVENTS.jsonl --left Q1 --right Q2 \\
        [--key Thing] [--max-gap-ms N] [--output OUT.jsonl]

Rows are taken in file order; the default late policy applies per (key,
quantity) stream in that order; the file's end is the end of every stream.
Imports neither pyspark nor pandas, so it starts fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import BinaryIO

import numpy as np

from operators.time import ms

from .batch import process_batch
from .config import JoinConfig
from .jsonl import key_codes, read_rows
from .writer import write_pairs


@dataclass
class Summary:
    rows: int = 0
    records: int = 0
    late: int = 0
    bad_lines: int = 0
    pairs: int = 0
    keys: int = 0
    seconds: float = 0.0

    def text(self) -> str:
        rate = self.pairs / self.seconds if self.seconds > 0 else float("inf")
        return (
            f"lsb: records={self.records} late={self.late} bad_lines={self.bad_lines} "
            f"pairs={self.pairs} keys={self.keys} seconds={self.seconds:.3f} "
            f"joins_per_s={rate:,.0f}"
        )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lsb",
        description="Join two quantities of an events.json file per key "
        "(LocalStreamBuffer semantics).",
    )
    p.add_argument("--input", required=True, help="JSON lines file ('-' for stdin)")
    p.add_argument("--left", required=True, help="left quantity field, e.g. actSpeed_C11")
    p.add_argument("--right", required=True, help="right quantity field, e.g. vaTorque_C11")
    p.add_argument("--key", default="Thing", help="join key field (default: Thing)")
    p.add_argument(
        "--time-field",
        default="Timestamp",
        help="event time field, integer ms (default: Timestamp)",
    )
    p.add_argument(
        "--max-gap-ms",
        type=int,
        default=None,
        help="only pairs with |left_time - right_time| <= N (default: no limit)",
    )
    p.add_argument(
        "--allowed-disorder-ms",
        type=int,
        default=0,
        help="reorder stage per stream: hold records until the stream is N ms past them "
        "(default 0: strict)",
    )
    p.add_argument("--output", default=None, help="output JSON lines file (default: stdout)")
    p.add_argument("--no-id", action="store_true", help="leave out the deterministic pair id")
    return p


def run(
    data: bytes,
    out: BinaryIO,
    left: str,
    right: str,
    key: str = "Thing",
    time_field: str = "Timestamp",
    max_gap: timedelta | None = None,
    with_id: bool = True,
    allowed_disorder: timedelta = timedelta(0),
) -> Summary:
    """The whole offline join on a file's bytes; returns the counts for the summary."""
    started = time.perf_counter()
    cfg = JoinConfig.single(left, right, max_gap=max_gap, allowed_disorder=allowed_disorder)
    rows = read_rows(data, key, time_field, left, right)
    codes, names = key_codes(rows)
    times = np.concatenate(rows.times) if rows.times else np.empty(0, np.int64)
    lv = np.concatenate(rows.left) if rows.left else np.empty(0)
    rv = np.concatenate(rows.right) if rows.right else np.empty(0)
    s = Summary(rows=len(times), bad_lines=rows.bad_lines, keys=len(names))
    order = np.argsort(codes, kind="stable")  # rows grouped per key, file order kept inside
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    for k, name in enumerate(names):
        idx = order[bounds[k] : bounds[k + 1]]
        li = idx[~np.isnan(lv[idx])]
        ri = idx[~np.isnan(rv[idx])]
        # Streams are independent, so "all left, then all right" is as good as file order.
        q = np.concatenate((np.zeros(len(li), np.intp), np.ones(len(ri), np.intp)))
        res = process_batch(
            cfg,
            None,
            q,
            np.concatenate((times[li], times[ri])),
            np.concatenate((lv[li], rv[ri])),
            end_of_stream=True,
        )
        s.records += len(q)
        s.late += len(res.late)
        s.pairs += write_pairs(out, name, cfg, res.pairs, with_id)
    s.seconds = time.perf_counter() - started
    if rows.bad_examples:
        for line_no, reason in rows.bad_examples:
            print(f"lsb: bad line {line_no}: {reason}", file=sys.stderr)
    return s


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.input == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.input, "rb") as f:
                data = f.read()
    except OSError as e:
        print(f"lsb: cannot read {args.input}: {e}", file=sys.stderr)
        return 2
    try:
        with (
            open(args.output, "wb")
            if args.output
            else contextlib.nullcontext(sys.stdout.buffer) as out
        ):
            summary = run(
                data,
                out,
                args.left,
                args.right,
                key=args.key,
                time_field=args.time_field,
                max_gap=None if args.max_gap_ms is None else ms(args.max_gap_ms),
                with_id=not args.no_id,
                allowed_disorder=ms(args.allowed_disorder_ms),
            )
            out.flush()
    except BrokenPipeError:  # e.g. piped into `head`: the reader is gone, stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:
        print(f"lsb: cannot write output: {e}", file=sys.stderr)
        return 2
    except ValueError as e:  # bad arguments such as --left == --right
        print(f"lsb: {e}", file=sys.stderr)
        return 2
    print(summary.text(), file=sys.stderr)
    return 0
