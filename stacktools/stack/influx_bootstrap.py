"""InfluxDB's first admin, created where no stranger can get in first.

InfluxDB 1.x with auth on lets *anyone* run ``CREATE USER ... WITH ALL PRIVILEGES`` without
credentials while it has no user. So its first start must not answer any TCP client until the
admin exists. InfluxDB cannot run its HTTP service without a TCP listener, so the first start is
a short bootstrap run of its own in which:

- the HTTP service also listens on a Unix socket in a directory only the stack's user can enter
  (0700; the socket itself 0600): the launcher creates the admin through it;
- its TCP listener is on an ephemeral port (the configured ports stay closed) and speaks only
  TLS with no protocol version allowed (``[tls] min-version`` above ``max-version``, with a
  throwaway certificate): every handshake fails, so no request over TCP reaches InfluxDB;
- Flux is off (building Flux's standard library takes seconds of CPU, on every start).

Then it stops, and the real configuration starts on the same data directory with its admin.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import json
import shutil
import socket
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from stacktools.stack.certs import write_self_signed
from stacktools.stack.errors import LauncherError, StackTimedOut
from stacktools.stack.process import ManagedProcess, tail
from streamkit.paths import private_directory

#: A Unix socket's path must fit in sun_path (108 bytes on Linux, with its NUL).
MAX_SOCKET_PATH = 100


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (the standard library speaks it over TCP only)."""

    def __init__(self, path: Path, timeout_s: float) -> None:
        super().__init__("localhost", timeout=timeout_s)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.socket_path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True)
class Bootstrap:
    """The bootstrap run's private files: its socket, certificate and key in a 0700 directory,
    its configuration in the server's (the run directory on influxd's command line is how the
    launcher knows the process as its own)."""

    directory: Path
    socket: Path
    config: Path
    certificate: Path
    key: Path

    def request(
        self, method: str, path: str, params: dict[str, str] | None = None, timeout_s: float = 10
    ) -> tuple[int, bytes]:
        """One request over the socket: (status, body)."""
        connection = UnixHTTPConnection(self.socket, timeout_s)
        try:
            body = urllib.parse.urlencode(params).encode() if params else None
            headers = {"Content-Type": "application/x-www-form-urlencoded"} if body else {}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def answers(self) -> bool:
        try:
            return self.request("GET", "/ping", timeout_s=2)[0] == 204
        except OSError:
            return False


@contextlib.contextmanager
def bootstrap_files(conf_dir: Path) -> Iterator[Bootstrap]:
    """A 0700 directory under ``conf_dir`` (under the system's temporary directory when that
    path is too long for a socket) with a throwaway certificate; removed afterwards, with the
    configuration."""
    directory = conf_dir / "bootstrap"
    if len(str(directory / "influxd.sock")) > MAX_SOCKET_PATH:
        directory = Path(tempfile.mkdtemp(prefix="influxd-bootstrap-"))  # 0700
    else:
        shutil.rmtree(directory, ignore_errors=True)
    private_directory(directory)
    files = Bootstrap(
        directory=directory,
        socket=directory / "influxd.sock",
        config=conf_dir / "influxdb-bootstrap.conf",
        certificate=directory / "throwaway.pem",
        key=directory / "throwaway-key.pem",
    )
    try:
        _write_throwaway_certificate(files.certificate, files.key)
        yield files
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        files.config.unlink(missing_ok=True)


def _write_throwaway_certificate(cert_path: Path, key_path: Path) -> None:
    """A self-signed certificate no client trusts: InfluxDB needs one to start its HTTPS
    listener, which accepts no handshake anyway."""
    write_self_signed(
        cert_path, key_path, "influxd bootstrap (no access)", dt.timedelta(days=1), ca=False
    )


def create_admin(
    process: ManagedProcess,
    command: list[str],
    files: Bootstrap,
    statement: str,
    timeout_s: float,
) -> bool:
    """Start ``command`` (influxd on the bootstrap configuration) as ``process``, run
    ``statement`` (the admin's CREATE USER) through the socket, stop it. True if the admin was
    created, False if the data directory already had one (InfluxDB then asks for credentials)."""
    process.start(command, cwd=files.directory)
    try:
        deadline = time.monotonic() + timeout_s
        while not files.answers():
            if process.pid() is None:
                raise LauncherError(
                    f"{process.name} exited during its bootstrap run; last lines of "
                    f"{process.log_file}:\n{tail(process.log_file)}"
                )
            if time.monotonic() > deadline:
                raise StackTimedOut(
                    f"{process.name}'s bootstrap run did not answer on {files.socket} within "
                    f"{timeout_s:.0f}s; last lines of {process.log_file}:\n{tail(process.log_file)}"
                )
            time.sleep(0.02)
        status, body = files.request("POST", "/query", {"q": statement})
    finally:
        process.stop()
    if status == 401:  # authentication asked for: an admin exists (a data dir from before)
        return False
    text = body.decode("utf-8", "replace")
    try:
        failed = status != 200 or "error" in json.dumps(json.loads(text))
    except ValueError:
        failed = True
    if failed:
        raise LauncherError(
            f"{process.name}: its bootstrap run could not create the admin: {status} {text[:300]}"
        )
    return True
