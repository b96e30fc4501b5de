"""The retention policies on the real InfluxDB: the provisioning creates one per measurement
family with its duration, and changes the duration when the setting changes; the connector's
writer puts each measurement into its policy; a point older than its policy keeps is dropped
by InfluxDB and counted as expired, never dead-lettered, while the points beside it in the same
request are written."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

from db_connector.config import ConnectorSettings
from db_connector.influx_writer import EXPIRED, InfluxWriter
from stacktools.stack.errors import InfluxError
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.wire.retention import POLICIES, source

pytestmark = pytest.mark.stack

NS_PER_MS = 1_000_000
DAY = timedelta(days=1)


@pytest.fixture
def database(stack_settings: Settings) -> Iterator[str]:
    name = f"test_{uuid.uuid4().hex[:10]}"
    yield name
    InfluxClient(stack_settings).drop_database(name)


def policies(settings: Settings, database: str) -> dict[str, str]:
    rows = InfluxClient(settings).rows(database, f'SHOW RETENTION POLICIES ON "{database}"')
    return {row["name"]: row["duration"] for row in rows}


def test_each_family_gets_its_policy_and_a_changed_setting_changes_it(
    stack_settings: Settings, database: str
) -> None:
    client = InfluxClient(stack_settings)
    client.create_database(database, stack_settings.influx_retention())
    found = policies(stack_settings, database)
    assert {policy: found[policy] for policy in POLICIES} == {
        "raw": "720h0m0s",  # the settings' defaults: 30, 30, 400, 800 and 30 days
        "joined": "720h0m0s",
        "windows": "9600h0m0s",
        "operation": "19200h0m0s",
        "diagnostics": "720h0m0s",
    }
    changed = Settings.from_sources(
        environ={"STACK_RUN_DIR": str(stack_settings.run_dir), "INFLUX_RETENTION_RAW": "2d"}
    )
    client.create_database(database, {**changed.influx_retention(), "joined": timedelta(0)})
    found = policies(stack_settings, database)
    assert (found["raw"], found["joined"]) == ("48h0m0s", "0s")  # 0s: InfluxDB's forever
    with pytest.raises(InfluxError, match="at least 1h"):
        client.create_database(database, {"raw": timedelta(minutes=5)})


def test_a_point_older_than_its_policy_is_counted_as_expired_and_its_neighbours_are_written(
    stack_settings: Settings, database: str
) -> None:
    client = InfluxClient(stack_settings)
    client.create_database(database, {"raw": DAY, "joined": DAY, "diagnostics": timedelta(0)})
    now_ns = time.time_ns() // NS_PER_MS * NS_PER_MS
    old_ns = now_ns - 3 * DAY // timedelta(microseconds=1) * 1000
    lines = [
        f"raw,quantity=temp,thing=M1 value=1 {old_ns}",
        f"raw,quantity=temp,thing=M1 value=2 {now_ns}",
        f"joined,pair=a:b,result_name=r,thing=M1 result=3 {now_ns}",
        f"late,quantity=temp,reason=r,stage=join,thing=M1 value=4 {old_ns}",
    ]
    settings = ConnectorSettings.from_sources(
        environ={
            "STACK_RUN_DIR": str(stack_settings.run_dir),
            "INFLUX_PORT": str(stack_settings.influx_port),
            "INFLUX_DATABASE": database,
        }
    )
    expired = EXPIRED.labels("raw")
    before = expired._value.get()
    writer = InfluxWriter(settings)
    try:
        assert writer.write(lines) == []  # nothing refused: the old raw point is not wrong
    finally:
        writer.close()
    assert expired._value.get() - before == 1
    assert [row["value"] for row in client.rows(database, f"SELECT * FROM {source('raw')}")] == [2]
    assert [
        row["result"] for row in client.rows(database, f"SELECT * FROM {source('joined')}")
    ] == [3]
    # kept forever: the policy 'off' stands for
    assert [row["value"] for row in client.rows(database, f"SELECT * FROM {source('late')}")] == [4]
    # and nothing of the pipeline's measurements went to the default policy
    assert not client.rows(database, 'SELECT * FROM "autogen"."raw"')
