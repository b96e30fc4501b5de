"""docker/influxdb/entrypoint.sh run for real, on the host's influxd 1.8.10, with the configuration
the `config` job renders (its paths and ports moved into a temporary directory and onto free
loopback ports, the certs job's files published into another): a stranger racing the
first start never becomes admin, no process ever shows the admin's password on its command
line, the server then speaks HTTPS only with its admin, and a restart on the same data keeps it
without a second bootstrap."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacktools.stack import certs
from stacktools.stack.influx import InfluxClient
from stacktools.stack.servers.influxdb import InfluxDB
from stacktools.stack.servers.site import Site
from stacktools.stack.settings import Settings
from streamkit.deadline import wait_until
from streamkit.paths import REPO_ROOT, find_influxd
from tests.support import procfs
from tests.support.cmdline_watch import CommandLineWatch
from tests.support.influx_stranger import Stranger, assert_stranger_lost
from tests.support.ports import free_ports
from tests.support.require import cannot_run

pytestmark = pytest.mark.stack

ENTRYPOINT = REPO_ROOT / "docker" / "influxdb" / "entrypoint.sh"
PASSWORD = "admin-password-of-the-test-1"


def influxd_of(script_pid: int) -> int:
    """The influxd of the entry point: its bootstrap child, else the script itself once it has
    exec'd the real run."""
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
    pid = entry.start()
    wait_until(entry.answers, 120, "the restarted influxd answering", interval_s=0.2)
    assert entry.pid() == pid  # no bootstrap child: the script exec'd influxd straight away
    assert entry.log.read_text().count("starting for real") == before.count("starting for real")
    status, body = InfluxClient(entry.settings).query("SHOW USERS")
    assert status == 200 and body["results"][0]["series"][0]["values"] == [["admin", True]]
