"""The README's main command, run the way a user runs it (on a slice of the sample to keep it short)."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

from streamkit.config import Settings
from streamkit.harness import REPO, expected_records

pytestmark = pytest.mark.stack
SAMPLE = REPO / "tests" / "data" / "test_events.json"


def test_demo_replays_reports_and_plots(stack_settings: Settings, tmp_path: Path) -> None:
    events = tmp_path / "events.json"
    with SAMPLE.open("rb") as source:
        events.write_bytes(b"".join(itertools.islice(source, 1500)))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "streamkit.demo", "--events", str(events), "--out", str(out),
                           "--timeout-s", "600"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "simulator rows" in done.stdout and "p99" in done.stdout  # progress lines and the summary
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows_published"] == 1500
    assert summary["raw_records"] == summary["influxdb_points"]["raw"] == len(expected_records(events))
    assert summary["influxdb_points"]["joined"] > 0 and summary["influxdb_points"]["aggregate"] > 0
    assert summary["latency"]["p99_s"] is not None
    for name in ("throughput.png", "joined_power.png", "window_aggregates.png"):
        assert (out / name).read_bytes().startswith(b"\x89PNG"), name
