"""verify --topics on the real broker: a scratch run's topics (the declared topic settings under
names of their own) get what the stages would write for the sample, as they write it (the raw
records idempotently, the others in committed transactions), plus what must not count: a
bridge's re-sends on the compacted raw topic and an aborted transaction holding an extra pair
and a copy of one. `python -m stacktools.verify --topics RUN` must say EXACT. A second scratch
run holds the same with three tamperings, each named in the verdict: a raw record deleted
(missing), a pair committed twice in two transactions (duplicated), a window's mean changed
(different). A third holds the records in the schema registry's wire format."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest

from spark_jobs.config import SinglePassSettings
from stacktools.stack.settings import Settings
from stacktools.stack.topics import load_topic_specs, provision
from stacktools.verify.events import read_records
from stacktools.verify.expect import expectation
from stacktools.verify.rules import rules_of
from streamkit.kafka_clients import (
    idempotent_producer,
    partition_count,
    produce_retrying,
    transactional_producer,
)
from streamkit.paths import REPO_ROOT
from streamkit.wire import thing_partition
from tests.support.verify_records import (
    DECLARED,
    encoded,
    fields_of,
    measurement,
    records,
    run_verify,
)

pytestmark = pytest.mark.stack
SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"


def scratch_run(settings: Settings) -> str:
    """The declared output topics under ``<topic>.<run>``, as a demo run has them."""
    run = f"verify-{uuid.uuid4().hex[:8]}"
    declared = {s.name: s for s in load_topic_specs(settings)}
    provision(
        settings,
        [dataclasses.replace(declared[name], name=f"{name}.{run}") for name in DECLARED.values()],
    )
    return run


def write(settings: Settings, run: str, batches: dict[str, list], *, aborted=(), later=()) -> None:
    """Raw records idempotently; the others in one committed transaction, then the ``aborted``
    records in a transaction that is aborted and the ``later`` ones in a second committed one."""
    topics = {kind: f"{name}.{run}" for kind, name in DECLARED.items()}
    partitions = {kind: partition_count(settings, topic) for kind, topic in topics.items()}

    def send(producer, kind: str, key: bytes, thing: str, value: bytes) -> None:
        produce_retrying(
            producer,
            topics[kind],
            value,
            key,
            partition=thing_partition(thing, partitions[kind]),
        )

    bridge = idempotent_producer(settings, f"verify-test-bridge-{run}")
    for key, thing, value in batches["raw"]:
        send(bridge, "raw", key, thing, value)
    assert bridge.flush(60) == 0
    stage = transactional_producer(settings, f"verify-test-stage-{run}")
    stage.begin_transaction()
    for kind in ("joined", "aggregates", "late", "opstats", "overloads"):
        for key, thing, value in batches.get(kind, []):
            send(stage, kind, key, thing, value)
    stage.commit_transaction(60)
    if aborted:
        stage.begin_transaction()
        for kind, (key, thing, value) in aborted:
            send(stage, kind, key, thing, value)
        stage.flush(60)  # on the broker, then aborted: read_committed must not see them
        stage.abort_transaction(60)
    if later:
        stage.begin_transaction()
        for kind, (key, thing, value) in later:
            send(stage, kind, key, thing, value)
        stage.commit_transaction(60)


def verify(run: str, out: Path, **env: str) -> tuple[int, str, dict]:
    return run_verify(SAMPLE, ["--topics", run], out, env)


def kinds(found: dict) -> tuple[int, int, int, int]:
    return found["missing"], found["extra"], found["duplicated"], found["different"]


@pytest.fixture(scope="module")
def sample_records() -> dict[str, list]:
    """What the stages write for the sample under the options verify reads (the defaults)."""
    rules = rules_of(SinglePassSettings.from_sources())
    return records(expectation(read_records(SAMPLE), rules))


def test_verify_topics_is_exact_on_committed_records_and_names_each_tampering(
    stack_settings: Settings, sample_records: dict[str, list], tmp_path: Path
) -> None:
    settings = stack_settings
    clean = scratch_run(settings)
    pair = sample_records["joined"][0]
    _, thing, value = pair
    other = fields_of("joined", value)
    invented = encoded("joined", {**other, "left_time_ms": other["left_time_ms"] - 7})
    write(
        settings,
        clean,
        # a bridge restart re-sent the first 40 records (byte-identical, same keys)
        {**sample_records, "raw": [*sample_records["raw"], *sample_records["raw"][:40]]},
        aborted=[("joined", pair), ("joined", (b"invented", thing, invented))],
    )
    code, text, verdict = verify(clean, tmp_path / "clean.json")
    assert code == 0 and verdict["exact"] and verdict["source"] == "the Kafka topics", text
    assert "verify: EXACT: the Kafka topics hold exactly what the file implies" in text
    assert measurement(verdict, "joined")["matched"] == len(sample_records["joined"])
    assert verdict["notes"]["raw"].startswith("40 re-sent copies collapsed"), text

    tampered = scratch_run(settings)
    deleted = sample_records["raw"][100]
    window = fields_of("aggregates", sample_records["aggregates"][5][2])
    key, thing, _ = sample_records["aggregates"][5]
    changed = (key, thing, encoded("aggregates", {**window, "mean": window["mean"] + 0.5}))
    batches = {
        **sample_records,
        "raw": [r for r in sample_records["raw"] if r is not deleted],
        "aggregates": [
            changed if i == 5 else r for i, r in enumerate(sample_records["aggregates"])
        ],
    }
    # the pair again in a second committed transaction: what a replayed batch would leave
    write(settings, tampered, batches, later=[("joined", sample_records["joined"][3])])
    code, text, verdict = verify(tampered, tmp_path / "tampered.json")
    assert code == 1 and not verdict["exact"], text
    assert "verify: DIFFERENT: the Kafka topics do not hold exactly" in text

    raw = measurement(verdict, "raw")
    dropped = fields_of("raw", deleted[2])
    assert kinds(raw) == (1, 0, 0, 0), text
    assert raw["by_thing"][dropped["thing"]]["missing"] == 1
    assert raw["examples"]["missing"][0]["time_ms"] == dropped["event_time_ms"], text

    joined = measurement(verdict, "joined")
    twice = fields_of("joined", sample_records["joined"][3][2])
    assert kinds(joined) == (0, 0, 1, 0), text
    example = joined["examples"]["duplicated"][0]
    assert (example["left_time_ms"], example["points"]) == (twice["left_time_ms"], 2), text

    aggregate = measurement(verdict, "aggregate")
    assert kinds(aggregate) == (0, 0, 0, 1), text
    values = aggregate["examples"]["different"][0]["values"]
    assert set(values) == {"mean"} and values["mean"]["found"] == window["mean"] + 0.5, text
    assert kinds(measurement(verdict, "late")) == (0, 0, 0, 0)
    for kind in ("missing", "duplicated", "different"):
        assert kind in text


def test_verify_topics_reads_the_registrys_wire_format_when_it_is_on(
    stack_settings: Settings, tmp_path: Path
) -> None:
    """With SCHEMA_REGISTRY on, each value opens with the registry header: read as such, exact;
    read as plain Avro (the setting not the run's), a usage error naming the topic."""
    rules = rules_of(SinglePassSettings.from_sources())
    framed = records(
        expectation(read_records(SAMPLE), rules),
        schema_ids={
            "raw": 11,
            "joined": 12,
            "aggregates": 13,
            "late": 14,
            "opstats": 15,
            "overloads": 16,
        },
    )
    run = scratch_run(stack_settings)
    write(stack_settings, run, framed)
    code, text, verdict = verify(run, tmp_path / "framed.json", SCHEMA_REGISTRY="true")
    assert code == 0 and verdict["exact"], text
    code, text, _ = verify(run, tmp_path / "plain.json", SCHEMA_REGISTRY="false")
    assert code == 2 and f"machinedata.raw.{run}" in text and "SCHEMA_REGISTRY is off" in text
