"""docker/influxdb/entrypoint.sh run for real, on the host's influxd 1.8.10, with the configuration
the `config` job renders (its paths and ports moved into a temporary directory and onto free
loopback ports, the certs job's files published into another): a stranger racing the
first start never becomes admin, no process ever shows the admin's password on its command
line, the server then speaks HTTPS only with its admin, a restart on the same data keeps it
without a second bootstrap, and a full disk (a small tmpfs this test makes) is ridden out: the
entry point restarts influxd once the disk has room again, since influxd 1.8 stays unable to
write after a full disk until it restarts (tests/db_connector/test_full_disk.py shows that)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacktools.stack import certs
from stacktools.stack.influx import InfluxClient
from stacktools.stack.resume import COMPOSE_WATCH_S
from stacktools.stack.servers.influxdb import InfluxDB
from stacktools.stack.servers.site import Site
from stacktools.stack.settings import Settings
from streamkit.deadline import wait_until
from streamkit.paths import REPO_ROOT, find_influxd
from tests.support import procfs
from tests.support.cmdline_watch import CommandLineWatch
from tests.support.full_disk import fill, small_filesystem
from tests.support.influx_stranger import Stranger, assert_stranger_lost
from tests.support.ports import free_ports
from tests.support.require import cannot_run

pytestmark = pytest.mark.stack

ENTRYPOINT = REPO_ROOT / "docker" / "influxdb" / "entrypoint.sh"
PASSWORD = "admin-password-of-the-test-1"
#: The full-disk test's data filesystem: room for a few points' files, many times over.
DISK = "16m"
#: Points written at once on the full disk: more than a write-ahead-log entry could squeeze
#: into what is left of the pages its segment already holds (a few points still fit there).
HELD = 5000
#: Two looks at the disk by the entry point, and influxd's start.
NOTICED_S = 2 * COMPOSE_WATCH_S + 30
PROBE = "probe,thing=P value={} {}000000000"


def influxd_of(script_pid: int) -> int:
    """The influxd of the entry point (its child: the bootstrap run, then the real one); the
    script itself while it has none."""
    for pid in procfs.descendants(script_pid) - {script_pid}:
        if procfs.cmdline(pid).startswith(b"influxd\0"):
            return pid
    return script_pid


def write_configuration(work: Path, conf: Path, data: Path, tls: certs.TlsFiles, port: int) -> None:
    """What the `config` job renders for compose, at this test's paths: compose's ports moved
    onto ``port`` (HTTP) and the one beside it (RPC), the bootstrap socket into ``work``."""
    site = Site(conf_dir=conf, data_dir=data, tls=tls, in_compose=True)
    environ = {
        "TLS": "true",
        "STACK_RUN_DIR": str(work / "render"),
        "INFLUX_ADMIN_PASSWORD": PASSWORD,
    }
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INFLUX_ADMIN_PASSWORD", PASSWORD)  # the job's environment
        files = InfluxDB(Settings.from_sources(environ=environ)).config_files(site)
    moved = {
        f'":{InfluxDB.COMPOSE_PORTS["http"]}"': f'"127.0.0.1:{port}"',
        f'"127.0.0.1:{InfluxDB.COMPOSE_PORTS["rpc"]}"': f'"127.0.0.1:{port + 2}"',
        str(InfluxDB.COMPOSE_BOOTSTRAP_DIR): str(work / "bootstrap"),
    }
    conf.mkdir()
    for name, content in files.items():
        text = content.decode()
        for compose, here in moved.items():
            text = text.replace(compose, here)
        (conf / name).write_text(text)


class EntryPoint:
    """The entry point started as compose starts it, with the environment compose gives it."""

    def __init__(self, work: Path) -> None:
        influxd = find_influxd()
        if influxd is None:
            cannot_run("influxd 1.8.10 not found: run scripts/setup.sh")
        port = free_ports(1)[0]
        tls = certs.publish(
            certs.ensure(Settings.from_sources(environ={"STACK_RUN_DIR": str(work / "ca")})),
            work / "tls",
            keystore_owner=os.geteuid(),
            registry_key_owner=os.geteuid(),
        )
        data = work / "influxdb"
        conf = work / "conf"
        self.env = {
            "PATH": f"{influxd.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(work),
            "INFLUX_CONF_DIR": str(conf),
            "INFLUX_DATA_DIR": str(data),
        }
        write_configuration(work, conf, data, tls, port)
        self.log = work / "entrypoint.log"
        self.settings = Settings.from_sources(
            environ={
                "STACK_RUN_DIR": str(work / "client"),
                "INFLUX_PORT": str(port),
                "TLS": "true",
                "TLS_CA_FILE": str(tls.ca),
                "INFLUX_USERNAME": "admin",
                "INFLUX_PASSWORD": PASSWORD,
            }
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> int:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                ["bash", str(ENTRYPOINT)], env=self.env, stdout=log, stderr=log
            )
        return self.process.pid

    def pid(self) -> int:
        return influxd_of(self.process.pid) if self.process else 0

    def answers(self) -> bool:
        try:
            return InfluxClient(self.settings).query("SHOW DATABASES")[0] == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


@pytest.fixture(scope="module")
def raced(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[EntryPoint, Stranger, CommandLineWatch]]:
    entry = EntryPoint(tmp_path_factory.mktemp("influx-entrypoint"))
    stranger = Stranger(entry.settings, entry.pid)
    watcher = CommandLineWatch().start()
    stranger.start()
    assert stranger.attempts.acquire(timeout=10)  # racing before the entry point starts
    try:
        entry.start()
        wait_until(entry.answers, 120, "the entry point's influxd answering", interval_s=0.2)
    except BaseException:
        entry.stop()
        print(entry.log.read_text()[-3000:])
        raise
    finally:
        stranger.stop.set()
        stranger.join(10)
        watcher.stop()
    try:
        yield entry, stranger, watcher
    finally:
        entry.stop()


def test_a_stranger_racing_the_first_start_never_becomes_admin(
    raced: tuple[EntryPoint, Stranger, CommandLineWatch],
) -> None:
    entry, stranger, _ = raced
    assert_stranger_lost(entry.settings, stranger)


def test_no_process_shows_the_admin_s_password(
    raced: tuple[EntryPoint, Stranger, CommandLineWatch],
) -> None:
    _, _, watcher = raced
    assert watcher.rounds > 10, "the watcher barely looked"
    assert any(b"entrypoint.sh" in line for line in watcher.seen), "the entry point was not seen"
    assert watcher.leaks({"INFLUX_ADMIN_PASSWORD": PASSWORD}) == []


def test_a_restart_keeps_the_admin_without_a_second_bootstrap(
    raced: tuple[EntryPoint, Stranger, CommandLineWatch],
) -> None:
    entry, _, _ = raced
    marker = Path(entry.env["INFLUX_DATA_DIR"]) / "admin-created"
    assert marker.exists()
    entry.stop()
    before = entry.log.read_text()
    entry.start()
    wait_until(entry.answers, 120, "the restarted influxd answering", interval_s=0.2)
    # no bootstrap run: the entry point's influxd is the real run from the start
    assert b"influxdb-bootstrap.conf" not in procfs.cmdline(entry.pid())
    assert b"/influxdb.conf" in procfs.cmdline(entry.pid())
    assert entry.log.read_text().count("starting for real") == before.count("starting for real")
    status, body = InfluxClient(entry.settings).query("SHOW USERS")
    assert status == 200 and body["results"][0]["series"][0]["values"] == [["admin", True]]


def test_a_full_disk_is_ridden_out_by_restarting_influxd_once_it_has_room(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "influxdb", DISK) as data:
        entry = EntryPoint(tmp_path)
        entry.start()
        try:
            wait_until(entry.answers, 120, "the entry point's influxd answering", interval_s=0.2)
            client = InfluxClient(entry.settings)
            client.execute('CREATE DATABASE "probe"', "create the probe database")
            assert client.write("probe", [PROBE.format(1, 1_700_000_000)]) == 204
            filler = fill(data)
            try:
                held = [PROBE.format(n, 1_700_000_000 + n) for n in range(2, 2 + HELD)]
                assert client.write("probe", held) != 204
                wait_until(
                    lambda: "its disk is full" in entry.log.read_text(),
                    NOTICED_S,
                    "the entry point seeing the full disk",
                )
                assert "has room again" not in entry.log.read_text()
            finally:
                filler.unlink()
            wait_until(
                lambda: "has room again" in entry.log.read_text(),
                NOTICED_S,
                "the entry point seeing room again",
            )

            def written() -> bool:
                try:
                    return client.write("probe", [PROBE.format(-1, 1_600_000_000)]) == 204
                except OSError:  # refused while influxd starts again
                    return False

            wait_until(written, NOTICED_S, "influxd writing after its restart", interval_s=1)
            # the point from before the full disk is kept; the refused ones are not there
            values = [row["value"] for row in client.rows("probe", 'SELECT value FROM "probe"')]
            assert sorted(values) == [-1.0, 1.0], values
        finally:
            entry.stop()
        assert entry.process is not None and entry.process.returncode == 0
        assert 'msg="Server shutdown completed"' in entry.log.read_text()
