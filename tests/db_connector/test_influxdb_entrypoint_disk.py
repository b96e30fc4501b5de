"""Compose's InfluxDB entry point (docker/influxdb/entrypoint.sh) brings InfluxDB back after a
full disk on its own, run here as a process around the real influxd 1.8.10 with its data on a
small tmpfs this test makes.

A full disk leaves influxd 1.8 running and unable to write until it restarts
(tests/db_connector/test_full_disk.py shows the wedged write-ahead log), and no restart policy
restarts a process that runs. The entry point watches its data directory with the thresholds
the launcher renders for it (stacktools.stack.resume.compose_watch_settings) and restarts
influxd once the disk has been full and has room again; SIGTERM stops it cleanly.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacktools.stack import Stack
from stacktools.stack.influx import InfluxClient
from stacktools.stack.resume import COMPOSE_WATCH_S, compose_watch_settings
from stacktools.stack.servers.influxdb import DISK_WATCH, InfluxDB
from stacktools.stack.settings import Settings
from streamkit.paths import REPO_ROOT, find_influxd
from tests.support.full_disk import fill, settings_in, small_run_dir
from tests.support.ports import free_ports
from tests.support.waits import settle

pytestmark = pytest.mark.stack
ENTRY_POINT = REPO_ROOT / "docker" / "influxdb" / "entrypoint.sh"
#: Room for InfluxDB's files of a few points, many times over.
DISK = "16m"
#: Points written at once while the disk is full: more than a write-ahead-log entry could
#: squeeze into what is left of the pages its segment already holds.
HELD = 5000
#: Two looks at the disk, and influxd's start (it opens its shards first).
NOTICED_S = 2 * COMPOSE_WATCH_S + 30
LINE = "probe,thing=P value={} {}000000000"


@pytest.fixture
def entry_point(stack_settings: Settings, tmp_path: Path) -> Iterator[tuple[Settings, Path]]:
    """An InfluxDB of its own, first set up by the launcher (its admin, its configuration), then
    run by the entry point with its data on a small tmpfs: its settings, and the entry point's
    log."""
    run = tmp_path / "run"
    log = tmp_path / "entrypoint.log"
    with small_run_dir(stack_settings, run, "influxdb", DISK) as data:
        settings = settings_in(stack_settings, run, {"INFLUX_PORT": free_ports(1)[0]})
        stack = Stack(settings, ["influxdb"], allow_external=False)
        stack.up()
        stack.down()
        server, influxd = InfluxDB(settings), find_influxd()
        assert influxd is not None, server.missing_install()
        (server.conf_dir / DISK_WATCH).write_text(compose_watch_settings())
        with log.open("wb") as output:
            process = subprocess.Popen(
                ["bash", str(ENTRY_POINT)],
                stdout=output,
                stderr=subprocess.STDOUT,
                env={
                    **os.environ,
                    "INFLUX_CONF_DIR": str(server.conf_dir),
                    "INFLUX_DATA_DIR": str(data),
                    "PATH": f"{influxd.parent}:{os.environ['PATH']}",
                },
                start_new_session=True,
            )
        try:
            settle(server.healthy, 60, "InfluxDB under the entry point", interval_s=0.5)
            yield settings, log
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0, log.read_text()[-3000:]
            assert 'msg="Server shutdown completed"' in log.read_text()
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def test_the_entry_point_restarts_influxd_once_its_full_disk_has_room(
    entry_point: tuple[Settings, Path],
) -> None:
    settings, log = entry_point
    client = InfluxClient(settings)
    client.create_scratch_database("probe")
    assert client.write("probe", [LINE.format(1, 1_700_000_000)]) == 204
    data = InfluxDB(settings).data_dir
    filler = fill(data)
    try:
        held = [LINE.format(n, 1_700_000_000 + n) for n in range(2, 2 + HELD)]
        assert client.write("probe", held) != 204
        settle(
            lambda: "its disk is full" in log.read_text(),
            NOTICED_S,
            "the entry point seeing the full disk",
        )
        assert "has room again" not in log.read_text()
    finally:
        filler.unlink()
    settle(
        lambda: "has room again" in log.read_text(),
        NOTICED_S,
        "the entry point seeing room again",
    )

    def written() -> bool:
        try:
            return client.write("probe", [LINE.format(-1, 1_600_000_000)]) == 204
        except OSError:  # refused while influxd starts again
            return False

    settle(written, NOTICED_S, "InfluxDB writing again after its restart", interval_s=1)
    # the point from before the full disk survived the restart; the refused ones were not kept
    values = [row["value"] for row in client.rows("probe", 'SELECT value FROM "probe"')]
    assert sorted(values) == [-1.0, 1.0], values
