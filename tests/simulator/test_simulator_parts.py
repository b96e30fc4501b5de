"""The simulator's pure parts: reading, external sorting, pacing and the generator."""

from __future__ import annotations

import json
import math
import time
from itertools import pairwise
from pathlib import Path

from simulator.generate import generate
from simulator.pacing import Pacer
from streamkit.events_source import SourceStats, read_rows, sorted_rows
from streamkit.identifiers import is_quantity, is_thing

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "test_events.json"


def test_sample_reads_completely_and_sorts_with_spills(tmp_path: Path) -> None:
    stats = SourceStats()
    in_file_order = list(read_rows(SAMPLE, stats))
    assert stats.rows == 5000 and not stats.rejected
    assert sum(a.timestamp_ms > b.timestamp_ms for a, b in pairwise(in_file_order)) == 646
    spilled = list(sorted_rows(iter(in_file_order), chunk_rows=333))  # 16 spill files
    in_memory = list(sorted_rows(iter(in_file_order), chunk_rows=10**6))
    expected = [
        row for _, row in sorted(enumerate(in_file_order), key=lambda p: (p[1].timestamp_ms, p[0]))
    ]
    assert spilled == in_memory == expected


def test_bad_lines_are_counted_with_reasons_and_python_dicts_become_json(tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text(
        "\n".join(
            [
                '{"Thing": "A", "Timestamp": 1554096380000, "x": 1}',
                "{'Thing': 'A', 'Timestamp': 1554096381000, 'x': 2}",
                # bytes: no JSON form
                "{'Thing': 'A', 'Timestamp': 1554096382000, 'x': 3, 'id': b'raw'}",
                "not json at all",
                '{"Thing": "A", "Timestamp": 3000, "x": NaN}',
                '{"Timestamp": 4000, "x": 1}',
                "",
            ]
        )
    )
    stats = SourceStats()
    rows = list(read_rows(path, stats))
    assert [r.timestamp_ms for r in rows] == [1554096380000, 1554096381000, 1554096382000]
    assert json.loads(rows[1].payload) == {"Thing": "A", "Timestamp": 1554096381000, "x": 2}
    assert json.loads(rows[2].payload) == {
        "Thing": "A",
        "Timestamp": 1554096382000,
        "id": "b'raw'",
        "x": 3,
    }
    assert dict(stats.rejected) == {"not_json": 1, "bad_quantity": 1, "missing_thing": 1}
    assert "line 4" in stats.examples["not_json"]


def test_fixed_rate_pacing() -> None:
    pacer = Pacer(rows_per_s=2000)
    started = time.perf_counter()
    for i in range(400):
        pacer.wait(i)
    assert 0.17 < time.perf_counter() - started < 0.5


def test_generator_is_deterministic_and_physical() -> None:
    first = list(generate(3000, 4, seed=7))
    assert first == list(generate(3000, 4, seed=7)) and first != list(generate(3000, 4, seed=8))
    assert len({row["Thing"] for row in first}) == 4
    # names the bridge takes (streamkit.identifiers)
    assert all(
        is_thing(row["Thing"]) and all(map(is_quantity, row.keys() - {"Thing", "Timestamp", "id"}))
        for row in first
    )
    times = [row["Timestamp"] for row in first]
    assert times == sorted(times)
    both = [row for row in first if {"actSpeed_C11", "vaTorque_C11", "vaPower_C11"} <= row.keys()]
    assert len(both) > 100
    for row in both:
        expected = 2 * math.pi / 60 * row["actSpeed_C11"] * row["vaTorque_C11"]
        assert math.isclose(row["vaPower_C11"], expected, rel_tol=1e-3, abs_tol=0.5)


def test_loop_shift_writes_milliseconds_whatever_the_input_unit() -> None:
    from simulator.cli import shifted
    from streamkit.events import parse_row

    payload = b'{"Thing": "A", "Timestamp": 1554096380, "x": 1}'  # seconds
    moved = parse_row(shifted(payload, 1554096380000 + 86_400_000))
    assert moved.timestamp_ms == 1554096380000 + 86_400_000 and moved.quantities == {"x": 1.0}


def test_published_rows_are_exact_at_every_scrape() -> None:
    """The demo's status line and throughput plot read this counter once a second: it must not
    lag behind the replay by a batch of rows."""
    from prometheus_client import CollectorRegistry, generate_latest

    from simulator.cli import Progress

    class Publisher:
        acked = 0

    publisher = Publisher()
    progress = Progress(publisher)  # type: ignore[arg-type]  # a stand-in: only its count
    registry = CollectorRegistry()
    registry.register(progress)
    for published in (1, 7, 1999, 2001):
        progress.published, publisher.acked = published, published - 1
        text = generate_latest(registry).decode()
        assert f"simulator_rows_published_total {published}.0" in text
        assert f"simulator_rows_acked_total {published - 1}.0" in text
