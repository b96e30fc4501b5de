"""What every server of the launcher shares: the :class:`Component` base class and the HTTP
health probes (plain, or trusting the stack's CA)."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Iterable

from stacktools.stack import certs
from stacktools.stack.errors import LauncherError
from stacktools.stack.influx import basic_auth
from stacktools.stack.servers.site import ConfigFiles, Site
from stacktools.stack.settings import Settings
from streamkit.errors import ConfigError
from streamkit.fields import credential_env
from streamkit.paths import private_directory, private_file
from streamkit.tls import client_context


def http_get(
    url: str,
    timeout_s: float = 2.0,
    auth: tuple[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, bytes]:
    """(status, body); (0, b"") when nothing answered or the server failed the TLS checks of
    ``context`` (with https)."""
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", basic_auth(*auth))
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def stack_tls_get(settings: Settings, url: str) -> tuple[int, bytes]:
    """:func:`http_get` trusting the stack's CA (when TLS is on); (0, b"") while there is no CA
    yet: a run directory the launcher has not started, so whatever answers is not ours."""
    try:
        context = client_context(settings)
    except ConfigError:
        return 0, b""
    return http_get(url, context=context)


class Component:
    """A server the launcher owns. Subclasses fill in configuration, command and health."""

    name = ""
    start_timeout_s = 60.0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.conf_dir = settings.run_dir / self.name
        self.data_dir = settings.run_dir / "data" / self.name

    @property
    def ports(self) -> list[int]:
        raise NotImplementedError

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ports[0]}"

    def missing_install(self) -> str | None:
        """Why this server cannot run here (not installed), or None."""
        return None

    def prepare(self) -> None:
        """Write configuration (always regenerated, so port changes take effect). Both
        directories are the stack user's alone (0700): configurations hold passwords, data
        directories the pipeline's data."""
        private_directory(self.conf_dir)
        private_directory(self.data_dir.parent)  # <run dir>/data
        private_directory(self.data_dir)

    @property
    def site(self) -> Site:
        """This host, as the launcher runs it: its run directory, the stack's TLS files."""
        tls = certs.files(self.settings) if self.settings.tls else None
        return Site(conf_dir=self.conf_dir, data_dir=self.data_dir, tls=tls)

    def config_files(self, site: Site) -> ConfigFiles:
        """The server's configuration for ``site``: the launcher's (:meth:`prepare` writes it)
        or a compose container's (``python -m stacktools.stack render``); empty for a server
        configured on its command line alone."""
        return {}

    def write_config(self) -> None:
        """This host's configuration files, each the launcher user's only (some hold
        passwords)."""
        for name, content in self.config_files(self.site).items():
            path = self.conf_dir / name
            private_directory(path.parent)
            with private_file(path) as out:
                out.write(content)

    def command(self) -> list[str]:
        raise NotImplementedError

    def healthy(self) -> bool:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """Environment the server needs besides the launcher's own."""
        return {}

    def after_healthy(self) -> None:
        """One-time bootstrap once the server answers (users, databases, topics)."""

    def require_passwords(self, system: str, users: Iterable[str]) -> None:
        missing = [
            credential_env(system, user)
            for user in users
            if not self.settings.credential(system, user)
        ]
        if missing:
            raise LauncherError(
                f"{self.name}: no password in the environment, .env or "
                f"{self.settings.credentials_path} for {', '.join(missing)}"
            )
