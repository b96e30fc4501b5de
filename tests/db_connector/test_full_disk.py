"""InfluxDB's disk filling up under the connector, on a filesystem this test makes (a small
tmpfs under InfluxDB's data directory).

While the disk is full the disk alert's condition holds on the stack's own Prometheus, InfluxDB
refuses writes, and the connector holds its offsets and retries: nothing is committed that was
not written. When space returns InfluxDB 1.8 does not write again: a full disk that failed an
append to a shard's open WAL segment leaves that writer with its error until the server
restarts (upstream influxdata/influxdb#9923, #24460; a write that needed a new shard fails in
the metadata instead, and recovers). The test shows that error first, so that a release that
recovers would be noticed; then the launcher's disk reporter restarts InfluxDB on its own, as
the runbook would (docs/operations.md#datadisknearlyfull). The connector goes on by itself and
InfluxDB equals the oracle.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring, private_database, private_topic
from stacktools.stack.influx import InfluxClient
from stacktools.stack.servers.influxdb import InfluxDB
from stacktools.stack.settings import Settings
from tests.support.full_disk import (
    fill,
    private_server,
    resumed_by_the_reporter,
    resuming,
    small_run_dir,
    wait_for_the_alert,
    wait_resumed,
    watched,
)
from tests.support.harness import metric
from tests.support.ports import free_ports
from tests.support.waits import settle

from .test_connector_stack import (
    all_records,
    assert_influx_equals_oracle,
    group_of,
    offsets_behind,
    produce,
    sample_feed,
    wait_consumed_to_end,
    wait_until_exact,
    write_conflict_seed,
)

pytestmark = pytest.mark.stack
#: Room for InfluxDB's files of the first half of the sample, several times over.
DISK = "16m"
#: Bytes freed before the probe: room for a write, and well below what the reporter waits for
#: (stacktools.stack.resume.ROOM_SHARE of DISK).
SOME_ROOM = 1 << 20
#: Raw records produced once the disk is full: more than a WAL entry could squeeze into what is
#: left of the pages its segment already holds.
HELD = 2000


@pytest.fixture
def small_influx(stack_settings: Settings, tmp_path: Path) -> Iterator[Settings]:
    """An InfluxDB of its own with its data on a small tmpfs, which the stack's connector
    writes to as to the stack's."""
    run = tmp_path / "run"
    with small_run_dir(stack_settings, run, "influxdb", DISK):
        ports = {"INFLUX_PORT": free_ports(1)[0]}
        with private_server(stack_settings, run, "influxdb", ports) as settings:
            yield settings


def test_a_full_influxdb_disk_loses_nothing_and_everything_resumes_on_its_own(
    stack_settings: Settings, small_influx: Settings, tmp_path: Path
) -> None:
    settings = small_influx
    topics = {
        kind: private_topic(stack_settings, kind, 2)
        for kind in ("raw", "joined", "aggregates", "late", "dlq")
    }
    database = private_database(settings)
    write_conflict_seed(settings, database)
    feed = sample_feed(duplicates=False)
    records = all_records(feed)
    # the sample's first raw records wait for the full disk; every shard the feed needs exists
    # by then, so the refused writes are appends to a shard's open WAL segment
    held = [r for r in records if r[0] == "raw"][:HELD]
    produce(stack_settings, topics, [r for r in records if r not in held])
    log = tmp_path / "connector.log"
    service = service_process(
        "db_connector",
        Wiring.for_connector(topics, group_of(database), database),
        log,
        "--retry-max",
        "1s",
        env={"INFLUX_PORT": str(settings.influx_port)},
    ).start()
    port = int(service.args[service.args.index("--metrics-port") + 1])
    data = settings.run_dir / "data" / "influxdb"
    name = f"influxdb-full-{database}"
    filler: Path | None = None
    reporter_log = tmp_path / "disk-space.log"
    try:
        # the launcher's disk reporter for this InfluxDB: it sees the disk fill, and restarts
        # InfluxDB on its own once the disk has room again, as the runbook would
        with watched(stack_settings, name, data), resuming(settings, "influxdb", reporter_log):
            wait_consumed_to_end(stack_settings, group_of(database), topics, 120)
            filler = fill(data)
            produce(stack_settings, topics, held)
            retries = metric(port, "connector_write_retries_total")

            def waiting() -> bool:
                assert service.alive(), log.read_text()[-3000:]
                return (
                    metric(port, "connector_write_retries_total") >= retries + 3
                    and metric(port, "connector_influx_available") == 0
                )

            # the connector's back-off is at most 1 s here (--retry-max)
            settle(waiting, 30, "the connector retrying on the full disk", interval_s=0.5)
            assert offsets_behind(stack_settings, group_of(database), topics), "committed unwritten"
            wait_for_the_alert(stack_settings, name)
            # some room back, less than the reporter waits for: InfluxDB still refuses
            os.truncate(filler, max(0, filler.stat().st_size - SOME_ROOM))
            assert offsets_behind(stack_settings, group_of(database), topics)
            probe = "probe,thing=P value=1 1554096380468000000"
            # into the raw points' policy: each shard has a write-ahead log of its own
            status, error = InfluxClient(settings).write_answer(database, [probe], policy="raw")
            assert status == 500 and "error writing WAL entry" in error, (status, error)
            assert not resumed_by_the_reporter(reporter_log)
            filler.unlink()
            filler = None
            # the reporter's round, InfluxDB's restart, the connector's back-off
            wait_resumed(reporter_log, InfluxDB(settings))
            wait_until_exact(settings, database, feed, service, 120)
            wait_consumed_to_end(stack_settings, group_of(database), topics, 120)
            assert_influx_equals_oracle(settings, database, feed, topics["dlq"])
            assert metric(port, "connector_influx_available") == 1
    finally:
        if filler is not None:
            filler.unlink(missing_ok=True)
        assert service.terminate() == 0, log.read_text()[-3000:]
