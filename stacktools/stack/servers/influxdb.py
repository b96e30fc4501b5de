"""The launcher's InfluxDB: its configuration (and the bootstrap run's), the first admin, and
the service users and database once it answers."""

from __future__ import annotations

import json
from pathlib import Path

from stacktools.stack import influx_bootstrap
from stacktools.stack.access import INFLUX_RIGHTS
from stacktools.stack.errors import InfluxError, LauncherError
from stacktools.stack.influx import InfluxClient
from stacktools.stack.influx_bootstrap import Bootstrap, bootstrap_files
from stacktools.stack.process import ManagedProcess
from stacktools.stack.resume import compose_watch_settings
from stacktools.stack.servers.base import Component, stack_tls_get
from stacktools.stack.servers.site import ConfigFiles, Site
from streamkit.paths import find_influxd, private_directory

#: The file compose's InfluxDB entry point sources for its watch of a full disk.
DISK_WATCH = "disk-watch.env"


class InfluxDB(Component):
    """InfluxDB 1.8.10 built from source (pure Go): InfluxQL plus the v2-compatible
    /api/v2/write and /health that influxdb-client needs. Auth on, Flux on; HTTPS with the
    stack's server certificate when TLS is on.

    Its first admin is created by a bootstrap run that no TCP client can talk to
    (:mod:`stacktools.stack.influx_bootstrap`), before the configured port ever opens."""

    name = "influxdb"

    @property
    def ports(self) -> list[int]:
        return [self.settings.influx_port, self.settings.influx_port + 2]

    @property
    def address(self) -> str:
        return self.settings.influx_base_url

    @property
    def config_file(self) -> Path:
        return self.conf_dir / "influxdb.conf"

    @property
    def admin_marker(self) -> Path:
        """Made once this data directory has its admin (and removed with the directory)."""
        return self.data_dir / "admin-created"

    def missing_install(self) -> str | None:
        return (
            None
            if find_influxd()
            else "influxd 1.8.10 not found: run scripts/setup.sh (builds it with go install)"
        )

    #: Inside a compose container: the HTTP port (the image's), and the RPC port, on loopback.
    COMPOSE_PORTS = {"http": 8086, "rpc": 8088}
    #: compose's bootstrap run: its socket's directory, made 0700 by the entry point.
    COMPOSE_BOOTSTRAP_DIR = Path("/run/influxdb-bootstrap")

    def config(self, site: Site, bootstrap: Bootstrap | None = None) -> str:
        """influxd's configuration; with ``bootstrap``, the bootstrap run's: the HTTP service on
        its private socket, its TCP listener on an ephemeral port refusing every TLS handshake
        (no protocol version between min and max), Flux off, the RPC port ephemeral too."""
        s = self.settings
        https: tuple[Path, Path] | None = None
        if bootstrap:
            rpc, http = "127.0.0.1:0", "127.0.0.1:0"
            https = (bootstrap.certificate, bootstrap.key)
            versions = ("tls1.3", "tls1.2")  # minimum above maximum: no handshake succeeds
        else:
            if site.in_compose:
                rpc = f"127.0.0.1:{self.COMPOSE_PORTS['rpc']}"
                http = f":{self.COMPOSE_PORTS['http']}"
            else:
                rpc, http = f"127.0.0.1:{s.influx_port + 2}", f"127.0.0.1:{s.influx_port}"
            if site.tls:
                https = (site.tls.server_cert, site.tls.server_key)
            versions = ("tls1.2", "tls1.3")
        lines = [
            "reporting-disabled = true",
            f"bind-address = {_toml(rpc)}",
            "[meta]",
            f"  dir = {_toml(site.data_dir / 'meta')}",
            "[data]",
            f"  dir = {_toml(site.data_dir / 'data')}",
            f"  wal-dir = {_toml(site.data_dir / 'wal')}",
            "  query-log-enabled = false",
            # the bounds of the index under any input (a machine sending a new name in every
            # message): a point past them is refused, and the connector dead-letters it
            f"  max-series-per-database = {s.influx_max_series}",
            f"  max-values-per-tag = {s.influx_max_tag_values}",
            "[http]",
            "  enabled = true",
            f"  bind-address = {_toml(http)}",
            "  auth-enabled = true",
            f"  flux-enabled = {'false' if bootstrap else 'true'}",
            "  log-enabled = false",
            "  max-body-size = 0",
        ]
        if https:
            lines += [
                "  https-enabled = true",
                f"  https-certificate = {_toml(https[0])}",
                f"  https-private-key = {_toml(https[1])}",
            ]
        if bootstrap:
            lines += [
                "  unix-socket-enabled = true",
                f"  bind-socket = {_toml(bootstrap.socket)}",
                '  unix-socket-permissions = "0600"',
            ]
        if https:
            lines += ["[tls]", f"  min-version = {_toml(versions[0])}"]
            lines += [f"  max-version = {_toml(versions[1])}"]
        lines += [
            "[monitor]",
            "  store-enabled = false",
            "[continuous_queries]",
            "  log-enabled = false",
        ]
        return "\n".join(lines) + "\n"

    def prepare(self) -> None:
        """The configuration; on a data directory without its admin, the bootstrap run first."""
        self.require_passwords("influx", (self.settings.influx_username, *INFLUX_RIGHTS))
        private_directory(self.conf_dir)
        private_directory(self.data_dir)
        self.write_config()
        if not self.admin_marker.exists():
            self.bootstrap()

    def config_files(self, site: Site) -> ConfigFiles:
        """``influxdb.conf``; in compose also the bootstrap run's configuration and the admin's
        statement, which the entry point (docker/influxdb/entrypoint.sh) sends through the
        bootstrap run's socket, as :meth:`bootstrap` does here, and the thresholds of the entry
        point's watch of a full disk."""
        files = {self.config_file.name: self.config(site).encode()}
        if site.in_compose and site.tls:
            directory = self.COMPOSE_BOOTSTRAP_DIR
            bootstrap = Bootstrap(
                directory=directory,
                socket=directory / "influxd.sock",
                config=site.conf_dir / "influxdb-bootstrap.conf",
                # no handshake succeeds on the bootstrap run's listener: any certificate serves
                certificate=site.tls.server_cert,
                key=site.tls.server_key,
            )
            files[bootstrap.config.name] = self.config(site, bootstrap).encode()
            files["admin.influxql"] = self.admin_statement().encode()
        if site.in_compose:
            files[DISK_WATCH] = compose_watch_settings().encode()
        return files

    def admin_statement(self) -> str:
        """The first admin's CREATE USER (the password rules forbid quotes and backslashes)."""
        s = self.settings
        self.require_passwords("influx", (s.influx_username,))
        return (
            f"CREATE USER \"{s.influx_username}\" WITH PASSWORD '{s.influx_password.reveal()}' "
            "WITH ALL PRIVILEGES"
        )

    def bootstrap(self) -> None:
        """Create the admin through the bootstrap run's private socket (a data directory from
        before this existed may have one already: then nothing is created)."""
        with bootstrap_files(self.conf_dir) as files:
            files.config.write_text(self.config(self.site, files))
            influx_bootstrap.create_admin(
                ManagedProcess(self.name, self.settings.run_dir),
                [str(find_influxd()), "run", "-config", str(files.config)],
                files,
                self.admin_statement(),
                self.start_timeout_s,
            )
        self.admin_marker.touch(mode=0o600)

    def command(self) -> list[str]:
        return [str(find_influxd()), "run", "-config", str(self.config_file)]

    def healthy(self) -> bool:
        status, body = stack_tls_get(self.settings, f"{self.settings.influx_base_url}/health")
        return status == 200 and b'"pass"' in body

    def after_healthy(self) -> None:
        """The service users with their current passwords, and the database with their rights.
        The admin exists already: made by this launcher's bootstrap run, or by compose's entry
        point (docker/influxdb/entrypoint.sh) the same way; never over TCP, where a stranger
        could make it first."""
        s = self.settings
        client = InfluxClient(s)
        status, _ = client.query("SHOW DATABASES")
        if status in (401, 403):  # 403: "create admin user first"; 401: no such user
            raise LauncherError(
                f"InfluxDB at {self.address} refused the admin's credentials (HTTP {status}); "
                f"its data ({self.data_dir} here, or compose's influxdb-data volume) was made "
                "with other credentials: restore them or remove that data"
            )
        self.require_passwords("influx", INFLUX_RIGHTS)
        _, body = client.query("SHOW USERS")
        existing = {
            row[0]
            for result in body.get("results", [])
            for series in result.get("series", [])
            for row in series.get("values", [])
        }
        try:
            for user in INFLUX_RIGHTS:
                password = s.credential("influx", user).reveal()
                client.execute(
                    f"SET PASSWORD FOR \"{user}\" = '{password}'"
                    if user in existing
                    else f"CREATE USER \"{user}\" WITH PASSWORD '{password}'",
                    f"create user {user}",
                )
            client.create_database(s.influx_database, s.influx_retention())
        except InfluxError as exc:
            raise LauncherError(str(exc)) from None


def _toml(value: object) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(str(value))
