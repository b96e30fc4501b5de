"""verify on the real stack: the demo replays the sample through every stage and ends with
verify's verdict (exact); the run's Kafka topics read with --topics are exact too; then the
run's InfluxDB database is tampered with, one case at a time,
and `python -m stacktools.verify` must fail with exit code 1, naming the difference: a deleted
raw point (missing), a joined pair written a second time under another point identity
(duplicated), and a window's changed mean (different)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.paths import REPO_ROOT
from streamkit.wire.retention import source
from tests.support.verify_records import measurement, run_verify

pytestmark = [pytest.mark.stack, pytest.mark.spark]
SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"


def verify(database: str, out: Path, where: str = "--database") -> tuple[int, str, dict]:
    return run_verify(SAMPLE, [where, database], out)


def one(client: InfluxClient, database: str, statement: str) -> dict:
    rows = client.rows(database, statement)
    assert rows, statement
    return rows[0]


def delete(client: InfluxClient, database: str, statement: str) -> None:
    status, body = client.query(statement, database=database)
    assert status == 200 and "error" not in json.dumps(body), (statement, body)


def line(name: str, tags: dict, fields: dict, time_ns: int) -> str:
    tag_text = ",".join(f"{k}={v}" for k, v in tags.items())
    field_text = ",".join(
        f"{k}={v}i" if isinstance(v, int) else f"{k}={v!r}" for k, v in fields.items()
    )
    return f"{name},{tag_text} {field_text} {time_ns}"


@pytest.fixture(scope="module")
def demo_summary(tmp_path_factory: pytest.TempPathFactory, stack_settings: Settings) -> dict:
    """The demo on the sample on the session's stack (which it leaves up for the checks that
    follow: a demo that started the stack itself stops it); its verdict must be exact."""
    out = tmp_path_factory.mktemp("demo")
    done = subprocess.run(
        [sys.executable, "-m", "stacktools.demo", "--events", str(SAMPLE), "--out", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert "verify: EXACT" in done.stdout, done.stdout[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verify"]["exact"], summary["verify"]
    assert "verify                exact" in done.stdout
    return summary


@pytest.fixture(scope="module")
def demo_database(demo_summary: dict) -> str:
    return demo_summary["database"]


def test_verify_topics_passes_on_the_runs_kafka_topics(demo_summary: dict, tmp_path: Path) -> None:
    """The same run's output topics, as Spark and the bridge wrote them, read with --topics."""
    run = demo_summary["raw_topic"].removeprefix("machinedata.raw.")
    code, text, verdict = verify(run, tmp_path / "topics.json", "--topics")
    assert code == 0 and verdict["exact"] and verdict["source"] == "the Kafka topics", text
    for name in ("raw", "joined", "aggregate"):
        assert measurement(verdict, name)["matched"] > 0, text


def test_verify_passes_on_the_run_then_names_each_tampering(
    demo_database: str, tmp_path: Path
) -> None:
    settings = Settings.from_sources()
    client = InfluxClient(settings)
    db = demo_database
    code, text, verdict = verify(db, tmp_path / "clean.json")
    assert code == 0 and verdict["exact"], text

    # 1. a raw point deleted
    raw = one(client, db, f"SELECT * FROM {source('raw')} WHERE \"thing\" = 'R0815' LIMIT 1")
    delete(
        client,
        db,
        f'DELETE FROM "raw" WHERE "thing" = \'R0815\' AND "quantity" = \'{raw["quantity"]}\' '
        f"AND time = {raw['time']}",
    )
    code, text, verdict = verify(db, tmp_path / "deleted.json")
    found = measurement(verdict, "raw")
    assert code == 1 and found["missing"] == 1 and found["by_thing"]["R0815"]["missing"] == 1, text
    assert found["examples"]["missing"][0]["time_ms"] == raw["time"] // 1_000_000, text
    assert "missing" in text and "R0815" in text
    assert (
        client.write(
            db,
            [
                line(
                    "raw",
                    {"thing": "R0815", "quantity": raw["quantity"]},
                    {"value": raw["value"]},
                    raw["time"],
                )
            ],
        )
        == 204
    )
    assert verify(db, tmp_path / "restored.json")[0] == 0

    # 2. a joined pair doubled: the same values on another time (as a duplicate would land)
    pair = one(client, db, f"SELECT * FROM {source('joined')} LIMIT 1")
    tags = {k: pair[k] for k in ("thing", "pair", "result_name")}
    fields = {
        "result": pair["result"],
        "left_value": pair["left_value"],
        "right_value": pair["right_value"],
        "left_time_ms": int(pair["left_time_ms"]),
        "right_time_ms": int(pair["right_time_ms"]),
    }
    doubled = pair["time"] + 1_000  # another sub-millisecond discriminator
    assert client.write(db, [line("joined", tags, fields, doubled)]) == 204
    code, text, verdict = verify(db, tmp_path / "doubled.json")
    found = measurement(verdict, "joined")
    assert code == 1 and found["duplicated"] == 1 and found["extra"] == 0, text
    example = found["examples"]["duplicated"][0]
    assert (example["left_time_ms"], example["points"]) == (fields["left_time_ms"], 2), text
    assert "duplicated" in text
    delete(
        client,
        db,
        f'DELETE FROM "joined" WHERE "thing" = \'{pair["thing"]}\' AND time = {doubled}',
    )
    assert verify(db, tmp_path / "undoubled.json")[0] == 0

    # 3. a value changed: a window's mean
    window = one(client, db, f'SELECT * FROM {source("aggregate")} WHERE "count" > 1 LIMIT 1')
    tags = {k: window[k] for k in ("thing", "quantity", "window")}
    changed = {"mean": window["mean"] + 0.5}
    assert client.write(db, [line("aggregate", tags, changed, window["time"])]) == 204
    code, text, verdict = verify(db, tmp_path / "changed.json")
    found = measurement(verdict, "aggregate")
    assert code == 1 and found["different"] == 1 and found["missing"] == found["extra"] == 0, text
    values = found["examples"]["different"][0]["values"]
    assert set(values) == {"mean"} and values["mean"]["found"] == window["mean"] + 0.5, text
    assert "different" in text
