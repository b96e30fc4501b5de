"""The demo and the user's file: a file that cannot be replayed is refused before any server or
service starts, and the wait for the replay ends as soon as the simulator is done."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from stacktools.demo.run import watch
from stacktools.demo.simulator_run import SimulatorRun
from stacktools.harness.processes import ServiceProcess
from stacktools.stack.settings import Settings
from streamkit.deadline import Deadline

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "content", [None, b"", b"Thing,Timestamp\nA,1\n"], ids=["missing", "empty", "csv"]
)
def test_a_file_that_cannot_be_replayed_exits_2_before_anything_starts(
    tmp_path: Path, content: bytes | None
) -> None:
    """A run directory of its own, empty: had the demo started a server (or generated the
    stack's passwords), its pid files, logs and credentials would be in there."""
    events, run_dir, out = tmp_path / "mine.json", tmp_path / "run", tmp_path / "out"
    if content is not None:
        events.write_bytes(content)
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "stacktools.demo", "--events", str(events), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "STACK_RUN_DIR": str(run_dir)},
    )
    assert run.returncode == 2, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"[demo] cannot replay {events}: "), run.stderr
    assert "starting" not in run.stdout
    assert not run_dir.exists() and not out.exists()
    assert time.monotonic() - started < 60  # no server start, no timeout: the check's answer


def simulator(tmp_path: Path, env: dict[str, str], *args: str) -> SimulatorRun:
    log = tmp_path / "simulator.log"
    return SimulatorRun(
        ServiceProcess(
            "simulator", ["--metrics-port", "0", "--no-progress", *args], log, env
        ).start()
    )


def test_a_simulator_that_fails_ends_the_wait_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real simulator refusing its file (exit 2): the wait is over long before its deadline,
    and says how the simulator ended; nothing is waited for downstream."""
    run = simulator(tmp_path, {}, "--input", str(tmp_path / "gone.json"))
    started = time.monotonic()

    def never_drained() -> bool:
        raise AssertionError("a failed simulator published nothing to drain")

    assert watch(run, lambda: None, never_drained, Deadline(300)) is False
    assert time.monotonic() - started < 60
    assert run.exit_code() == 2 and run.failed() and run.published == 0
    said = capsys.readouterr().out
    assert said.startswith(
        f"[demo] simulator exited with code 2: published 0 rows; its last line: "
        f"python -m simulator: cannot replay {tmp_path / 'gone.json'}: no such file"
    ), said


def test_a_stage_that_stops_is_an_error_even_while_the_simulator_runs(tmp_path: Path) -> None:
    run = simulator(tmp_path, {}, "--input", str(tmp_path / "gone.json"))

    def stage_died() -> None:
        raise RuntimeError("mqtt_bridge stopped")

    with pytest.raises(RuntimeError, match="mqtt_bridge stopped"):
        watch(run, stage_died, lambda: False, Deadline(300))
    assert run.service.process is not None
    run.service.process.wait(60)


@pytest.mark.stack
def test_the_wait_ends_when_the_summary_is_logged_not_when_the_simulator_exits(
    tmp_path: Path, stack_settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real replay (3 rows and a bad one, as a pretty JSON array) to the real broker under a
    prefix of its own: the simulator lingers 120 s after its summary, yet the wait is over once
    the summary is there, with what it published and rejected."""
    events = tmp_path / "events.json"
    events.write_text(
        '[\n  {"Thing": "A", "Timestamp": 1554096380000, "x": 1},\n  "oops",\n'
        '  {"Thing": "A", "Timestamp": 1554096381000, "x": 2},\n'
        '  {"Thing": "B", "Timestamp": 1554096380000, "x": 3}\n]\n'
    )
    prefix = f"{stack_settings.mqtt_topic_prefix}/test-files-{uuid.uuid4().hex[:8]}"
    run = simulator(
        tmp_path,
        stack_settings.as_environment(),
        "--input",
        str(events),
        "--mqtt-topic-prefix",
        prefix,
        "--linger",
        "2m",
    )
    try:
        assert watch(run, lambda: None, lambda: True, Deadline(90)) is True
        assert run.service.alive()  # still lingering: the wait did not wait for the exit
        summary = run.summary
        assert summary is not None
        assert run.published == 3 and summary["rows_acked"] == 3
        assert summary["rejected_rows"] == [
            {"line": 3, "reason": "not_object", "detail": "payload is a JSON str, not an object"}
        ]
        assert (
            capsys.readouterr().out
            == "[demo] simulator done: published 3 rows, rejected 1 (see summary.json)\n"
        )
    finally:
        run.service.terminate(60)
