"""A stranger on the host racing InfluxDB's first start to become its admin (CREATE USER ...
WITH ALL PRIVILEGES, allowed by InfluxDB 1.x while it has no user), and the verdict on what it
got: used against the launcher's bootstrap (tests/stacktools/test_influx_tls.py) and compose's
entry point (tests/docker/test_influxdb_entrypoint.py)."""

from __future__ import annotations

import collections
import dataclasses
import http.client
import ssl
import threading
import urllib.parse
from collections.abc import Callable

from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.secret import Secret
from tests.support import procfs

STRANGER, STRANGER_PASSWORD = "stranger", "stranger-wants-in-1"
GRAB_ADMIN = f"CREATE USER {STRANGER} WITH PASSWORD '{STRANGER_PASSWORD}' WITH ALL PRIVILEGES"
#: Go's answer to plain HTTP on a TLS port (InfluxDB never sees the request).
PLAIN_ON_TLS = "HTTP 400: Client sent an HTTP request to an HTTPS server."


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on, as any local user can find them (/proc)."""
    return {listener.port for listener in procfs.listeners({pid}).get(pid, [])}


class Stranger(threading.Thread):
    """Another user on the host, racing the first start: as fast as it can, from before the
    launcher spawns influxd until told to stop, it sends CREATE USER ... WITH ALL PRIVILEGES
    without credentials to the configured port and to every TCP port the influxd process
    listens on (the bootstrap run's ephemeral ones included), over plain HTTP and over TLS
    that verifies nothing. ``outcomes`` counts what each attempt got, by port kind."""

    def __init__(self, settings: Settings, pid: Callable[[], int]) -> None:
        super().__init__(daemon=True)
        self.settings = settings
        self.pid = pid
        self.stop = threading.Event()
        self.outcomes: collections.Counter[tuple[str, str]] = collections.Counter()
        self.attempts = threading.Semaphore(0)

    def run(self) -> None:
        configured = {self.settings.influx_port, self.settings.influx_port + 2}
        unverified = ssl.create_default_context()
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE
        while not self.stop.is_set():
            found = listening_ports(self.pid()) - configured
            for port in [self.settings.influx_port, *sorted(found)]:
                kind = "configured" if port in configured else "bootstrap"
                for context in (None, unverified):
                    outcome = self.attempt(port, context)
                    self.outcomes[(kind, outcome)] += 1
                    self.attempts.release()

    @staticmethod
    def attempt(port: int, context: ssl.SSLContext | None) -> str:
        connection = (
            http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=context)
            if context
            else http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        )
        scheme = "https" if context else "http"
        try:
            connection.request(
                "POST",
                "/query",
                body=urllib.parse.urlencode({"q": GRAB_ADMIN}),
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
            response = connection.getresponse()
            return f"{scheme}: HTTP {response.status}: {response.read().decode().strip()}"
        except ConnectionRefusedError:
            return f"{scheme}: connection refused"
        except ssl.SSLError as exc:
            return f"{scheme}: TLS {exc.reason}"
        except (ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError):
            return f"{scheme}: closed"
        except OSError as exc:
            return f"{scheme}: {type(exc).__name__}"
        finally:
            connection.close()


def assert_stranger_lost(settings: Settings, stranger: Stranger) -> None:
    outcomes = stranger.outcomes
    print(f"the stranger's attempts (TLS {settings.tls}):")
    for (kind, outcome), count in sorted(outcomes.items()):
        print(f"  {count:6}  {kind:10}  {outcome}")
    bootstrap = {outcome for kind, outcome in outcomes if kind == "bootstrap"}
    configured = {outcome for kind, outcome in outcomes if kind == "configured"}
    # the race was run: the bootstrap run's listener was found and attacked
    assert bootstrap, outcomes
    # ... and every attempt on it failed before InfluxDB saw a request: the TLS handshake (no
    # protocol version is allowed), Go's answer to plain HTTP (or the reset of its close), or
    # its RPC port closing on them
    assert bootstrap <= {
        "https: TLS TLSV1_ALERT_PROTOCOL_VERSION",
        f"http: {PLAIN_ON_TLS}",
        "http: closed",
        "https: closed",
        "http: connection refused",  # stopping
        "https: connection refused",
    }, outcomes
    assert "https: TLS TLSV1_ALERT_PROTOCOL_VERSION" in bootstrap, outcomes
    # the configured port: closed until the admin existed, then asking for credentials
    unauthenticated = 'HTTP 401: {"error":"unable to parse authentication credentials"}'
    allowed = {"http: connection refused", "https: connection refused"}
    allowed |= (
        # Go closes the connection with the plain request unread: the reset may come first
        {f"https: {unauthenticated}", f"http: {PLAIN_ON_TLS}", "http: closed"}
        if settings.tls
        else {f"http: {unauthenticated}", "https: TLS WRONG_VERSION_NUMBER", "https: closed"}
    )
    assert configured <= allowed, outcomes
    assert "http: connection refused" in configured, outcomes

    client = InfluxClient(settings)
    status, body = client.query("SHOW USERS")
    assert status == 200, body
    users = {row[0]: row[1] for row in body["results"][0]["series"][0]["values"]}
    assert STRANGER not in users and users[settings.influx_username] is True, users
    as_stranger = dataclasses.replace(
        settings, influx_username=STRANGER, influx_password=Secret(STRANGER_PASSWORD)
    )
    status, body = InfluxClient(as_stranger).query("SHOW USERS")
    assert (status, body) == (401, {"error": "authorization failed"})
