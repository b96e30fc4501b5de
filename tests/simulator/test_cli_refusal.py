"""`python -m simulator` refuses a file it cannot replay before it connects: exit code 2 and one
line on stderr naming the file and the cause, no traceback. The MQTT port is a closed one, so a
simulator that went on to connect would fail differently."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def simulator(path: Path, closed_port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "simulator",
            "--input",
            str(path),
            "--metrics-port",
            "0",
            "--mqtt-port",
            str(closed_port),
            "--no-progress",
            # the port stays closed: no need to wait for a broker's restart
            "--reach-timeout",
            "1s",
        ],
        cwd=REPO,
        # plain TCP: no CA is needed to reach the closed port (without a stack there is none)
        env={**os.environ, "TLS": "false"},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("name", "content", "cause"),
    [
        ("missing.json", None, "no such file"),
        ("empty.json", b"", "is empty"),
        (
            "table.csv",
            b"Thing,Timestamp,x\nA,1554096380000,1\n",
            "is neither JSON lines nor a JSON array",
        ),
        (
            "utf16.json",
            '{"Thing": "A", "Timestamp": 1554096380000, "x": 1}\n'.encode("utf-16"),
            "is UTF-16",
        ),
        (
            "latin1.json",
            '{"Thing": "Mühle", "Timestamp": 1554096380000, "x": 1}\n'.encode("latin-1"),
            "is not UTF-8 text",
        ),
        ("invalid.json", b'{"Thing": "A", "Timestamp": 1554096380000}\n', "has no valid row"),
        (
            "broken.json",
            b'[\n  {"Thing": "A", "Timestamp": 1554096380000, "x": 1},\n  {"Thing": \n]',
            "is not a valid JSON array",
        ),
        (
            "cut.json.gz",
            gzip.compress(b'{"Thing": "A", "Timestamp": 1554096380000, "x": 1}\n' * 500)[:-30],
            "is a damaged or truncated gzip file",
        ),
    ],
)
def test_a_file_that_cannot_be_replayed_exits_2_with_one_line(
    tmp_path: Path, free_port: int, name: str, content: bytes | None, cause: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    run = simulator(path, free_port)
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"python -m simulator: cannot replay {path}: {cause}"
    ), run.stderr


def test_a_directory_is_refused_too(tmp_path: Path, free_port: int) -> None:
    run = simulator(tmp_path, free_port)
    assert (run.returncode, run.stderr) == (
        2,
        f"python -m simulator: cannot replay {tmp_path}: is a directory, not a file\n",
    )


def test_a_readable_file_gets_past_the_check(tmp_path: Path, free_port: int) -> None:
    """The same command on a good file goes on to connect (and fails there, the port being
    closed): the refusals above are the check's, not any start-up failure."""
    path = tmp_path / "events.json"
    path.write_bytes(b'{"Thing": "A", "Timestamp": 1554096380000, "x": 1}\n')
    run = simulator(path, free_port)
    assert run.returncode == 1 and "cannot replay" not in run.stderr
    assert "metrics endpoint up" in run.stderr  # it started: logs, /metrics, then MQTT
    assert run.stderr.splitlines()[-1].startswith(
        f"python -m simulator: cannot connect to MQTT at 127.0.0.1:{free_port}: "
    ), run.stderr
