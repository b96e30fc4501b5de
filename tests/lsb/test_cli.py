"""The offline CLI contract: arguments, output fields, late count, bad lines, fast start."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from lsb import cli, jsonl
from lsb.results import mechanical_power
from operators import ms
from tests.oracles.join import oracle_pairs

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "test_events.json"
SPEED, TORQUE = "actSpeed_C11", "vaTorque_C11"


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lsb", *args],
        cwd=ROOT,
        capture_output=True,
        input=stdin,
        timeout=120,
    )


def summary(stderr: bytes) -> dict[str, str]:
    line = [ln for ln in stderr.decode().splitlines() if ln.startswith("lsb: records=")][-1]
    return dict(kv.split("=", 1) for kv in line[len("lsb: ") :].split())


def reference(lines: list[dict], left: str, right: str, gap: int | None = None) -> tuple[set, int]:
    """Independent re-implementation: file-order late policy per stream + brute-force oracle."""
    streams: dict[tuple[str, str], list[int]] = defaultdict(list)
    late = 0
    for row in lines:
        for q in (left, right):
            if row.get(q) is None:
                continue
            s = streams[(row["Thing"], q)]
            if s and row["Timestamp"] <= s[-1]:
                late += 1
            else:
                s.append(row["Timestamp"])
    pairs = set()
    for key in {k for k, _ in streams}:
        for a, b in oracle_pairs(streams[(key, left)], streams[(key, right)], gap):
            pairs.add((key, a, b))
    return pairs, late


def test_help_works():
    r = run_cli("--help")
    assert r.returncode == 0
    assert b"--left" in r.stdout and b"--max-gap-ms" in r.stdout


def test_real_sample_joins_and_reports_its_late_count(tmp_path):
    out = tmp_path / "out.jsonl"
    r = run_cli("--input", str(SAMPLE), "--left", SPEED, "--right", TORQUE, "--output", str(out))
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in SAMPLE.read_text().splitlines()]
    want, want_late = reference(rows, SPEED, TORQUE)
    s = summary(r.stderr)
    assert int(s["records"]) == 2681 + 4705  # the design note's counts
    assert int(s["late"]) == want_late > 0
    assert int(s["bad_lines"]) == 0
    got = [json.loads(x) for x in out.read_text().splitlines()]
    assert int(s["pairs"]) == len(got)
    keys = {(g["thing"], g["left_time"], g["right_time"]) for g in got}
    assert len(keys) == len(got)  # no duplicates
    assert keys == want
    values: dict = {}
    for row in rows:  # the first occurrence of a timestamp is the one the late policy keeps
        for q in (SPEED, TORQUE):
            if q in row:
                values.setdefault((row["Thing"], row["Timestamp"], q), row[q])
    for g in got[:500]:
        assert isinstance(g["left_time"], int) and isinstance(g["right_time"], int)
        assert g["left_value"] == values[(g["thing"], g["left_time"], SPEED)]
        assert g["right_value"] == values[(g["thing"], g["right_time"], TORQUE)]
        assert math.isclose(
            g["result"],
            mechanical_power(g["left_value"], g["right_value"]),
            rel_tol=1e-12,
            abs_tol=1e-12,
        )
        assert g["event_time"] == max(g["left_time"], g["right_time"])
        assert len(g["id"]) == 32


def test_stdout_and_max_gap():
    r = run_cli(
        "--input",
        str(SAMPLE),
        "--left",
        SPEED,
        "--right",
        TORQUE,
        "--max-gap-ms",
        "1500",
        "--no-id",
    )
    assert r.returncode == 0, r.stderr
    got = [json.loads(x) for x in r.stdout.decode().splitlines()]
    rows = [json.loads(x) for x in SAMPLE.read_text().splitlines()]
    want, _ = reference(rows, SPEED, TORQUE, gap=1500)
    assert {(g["thing"], g["left_time"], g["right_time"]) for g in got} == want
    assert all("id" not in g for g in got)


def test_cli_does_not_import_pyspark(tmp_path):
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['lsb', '--input', {str(SAMPLE)!r},"
        f" '--left', {SPEED!r}, '--right', {TORQUE!r},"
        f" '--output', {str(tmp_path / 'o.jsonl')!r}]\n"
        "try:\n    runpy.run_module('lsb', run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code == 0, e.code\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j', 'pandas'))\n"
        "print('HEAVY', bad)\n"
    )
    r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"HEAVY []" in r.stdout


def _messy_file() -> tuple[bytes, int, list[dict]]:
    """Good rows (some Python-dict style) mixed with every kind of bad line."""
    good: list[dict] = []
    lines: list[str] = []
    for i in range(300):
        row: dict[str, object] = {
            "Thing": "A" if i % 3 else "B",
            "Timestamp": 1000 * i,
            "id": f"x{i}",
        }
        if i % 2 == 0:
            row[SPEED] = float(i)
        if i % 5 != 1:
            row[TORQUE] = i / 7
        good.append(row)
        lines.append(repr(row) if i % 17 == 0 else json.dumps(row))
        if i == 150:
            lines.append('{"Thing": "A", "Timestamp": 5, "other": 1}')  # neither quantity: skipped
    bad = [
        '{"Thing": "A", "Timestamp": 1, "actSpeed_C11": ',  # truncated
        '{"Thing": "A", "actSpeed_C11": 1.0}',  # no time
        '{"Timestamp": 3, "actSpeed_C11": 1.0}',  # no key
        '{"Thing": "A", "Timestamp": 4, "actSpeed_C11": NaN}',
        '{"Thing": "A", "Timestamp": 4, "vaTorque_C11": Infinity}',
        '{"Thing": "A", "Timestamp": "6", "actSpeed_C11": 1.0}',
        '{"Thing": "A", "Timestamp": 7.5, "actSpeed_C11": 1.0}',
        '{"Thing": "A", "Timestamp": 8, "actSpeed_C11": "fast"}',
        '{"Thing": "A", "Timestamp": 9, "actSpeed_C11": true}',
        '{"Thing": 5, "Timestamp": 10, "actSpeed_C11": 1.0}',
        "[1, 2, 3]",
        "not json at all",
        "{'Thing': 'A', 'Timestamp': 11, 'actSpeed_C11': float('nan')}",
    ]
    for n, b in enumerate(bad):
        lines.insert(20 * n + 7, b)
    lines.insert(40, "")
    return ("\n".join(lines) + "\n").encode(), len(bad), good


@pytest.mark.parametrize("arrow", [True, False])
def test_bad_lines_are_counted_never_fatal(monkeypatch, arrow):
    data, n_bad, good = _messy_file()
    if not arrow:
        monkeypatch.setattr(jsonl, "pa_json", None)
    out = io.BytesIO()
    s = cli.run(data, out, SPEED, TORQUE)
    assert s.bad_lines == n_bad
    want, want_late = reference(good, SPEED, TORQUE)
    got = [json.loads(x) for x in out.getvalue().decode().splitlines()]
    assert {(g["thing"], g["left_time"], g["right_time"]) for g in got} == want
    assert s.late == want_late
    assert s.pairs == len(got) == len(want)


def test_bad_input_through_the_real_entry_point(tmp_path):
    data, n_bad, _ = _messy_file()
    path = tmp_path / "messy.jsonl"
    path.write_bytes(data)
    r = run_cli(
        "--input",
        str(path),
        "--left",
        SPEED,
        "--right",
        TORQUE,
        "--output",
        str(tmp_path / "o.jsonl"),
    )
    assert r.returncode == 0, r.stderr
    assert int(summary(r.stderr)["bad_lines"]) == n_bad
    assert b"bad line" in r.stderr


def test_row_holding_both_quantities_gives_one_tie_pair():
    data = b'{"Thing": "T", "Timestamp": 5, "actSpeed_C11": 100.0, "vaTorque_C11": 2.0}\n'
    out = io.BytesIO()
    s = cli.run(data, out, SPEED, TORQUE)
    (line,) = out.getvalue().decode().splitlines()
    g = json.loads(line)
    assert (g["left_time"], g["right_time"], g["left_value"], g["right_value"]) == (
        5,
        5,
        100.0,
        2.0,
    )
    assert math.isclose(g["result"], 2 * math.pi / 60 * 200.0)
    assert s.records == 2 and s.pairs == 1


def test_missing_input_file_is_an_error_not_a_traceback(tmp_path):
    r = run_cli("--input", str(tmp_path / "nope.jsonl"), "--left", SPEED, "--right", TORQUE)
    assert r.returncode == 2
    assert b"Traceback" not in r.stderr


def test_reorder_stage_on_the_real_sample_joins_every_record():
    """The sample is far from time-ordered; a wide enough reorder stage sorts it per stream."""
    rows = [json.loads(x) for x in SAMPLE.read_text().splitlines()]
    out = io.BytesIO()
    s = cli.run(SAMPLE.read_bytes(), out, SPEED, TORQUE, allowed_disorder=ms(10**12))
    assert s.late == 0 and s.records == 2681 + 4705
    in_order = sorted(rows, key=lambda r: r["Timestamp"])
    want, late = reference(in_order, SPEED, TORQUE)
    assert late == 0
    got = {
        (g["thing"], g["left_time"], g["right_time"])
        for g in map(json.loads, out.getvalue().decode().splitlines())
    }
    assert got == want and s.pairs == len(want)
