"""An InfluxQL client over HTTP for the tools and tests (the launcher's set-up, the dashboards
checker, the demo's report and plots, the test lanes). The connector writes with
influxdb-client; this is for everything that queries or administers."""

from __future__ import annotations

import base64
import functools
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request

from stacktools.stack.access import INFLUX_RIGHTS
from stacktools.stack.errors import InfluxError
from streamkit.config import InfluxSettings
from streamkit.tls import client_context


def basic_auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class InfluxClient:
    """Statements as the settings' InfluxDB user, over HTTPS verified against the stack's CA
    when TLS is on."""

    def __init__(self, settings: InfluxSettings) -> None:
        self.settings = settings

    @functools.cached_property
    def tls_context(self) -> ssl.SSLContext | None:
        return client_context(self.settings)

    def query(
        self,
        statement: str,
        *,
        auth: bool = True,
        database: str | None = None,
        epoch: str | None = None,
    ) -> tuple[int, dict]:
        """POST an InfluxQL statement (POST: CREATE/DROP are refused over GET); ``epoch``
        (ms, ns, ...) makes times integers instead of RFC 3339 strings."""
        s = self.settings
        params = {
            "q": statement,
            **({"db": database} if database else {}),
            **({"epoch": epoch} if epoch else {}),
        }
        request = urllib.request.Request(
            f"{s.influx_base_url}/query", data=urllib.parse.urlencode(params).encode()
        )
        if auth:
            request.add_header(
                "Authorization", basic_auth(s.influx_username, s.influx_password.reveal())
            )
        try:
            with urllib.request.urlopen(request, timeout=60, context=self.tls_context) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def rows(self, database: str, statement: str) -> list[dict]:
        """Rows of one SELECT as dicts (tags of GROUP BY * included), times in ns."""
        status, body = self.query(statement, database=database, epoch="ns")
        result = body.get("results", [{}])[0] if status == 200 else {}
        if status != 200 or "error" in result:
            raise InfluxError(f"{statement}: {status} {body}")
        return [
            {**series.get("tags", {}), **dict(zip(series["columns"], values, strict=True))}
            for series in result.get("series", [])
            for values in series["values"]
        ]

    def execute(self, statement: str, what: str) -> None:
        """An administrative statement that must succeed."""
        status, body = self.query(statement)
        if status != 200 or "error" in json.dumps(body):
            raise InfluxError(f"InfluxDB: could not {what}: {status} {body}")

    def write(self, database: str, lines: list[str], precision: str = "ns") -> int:
        """POST line protocol; the HTTP status (204: written)."""
        return self.write_answer(database, lines, precision)[0]

    def write_answer(
        self, database: str, lines: list[str], precision: str = "ns"
    ) -> tuple[int, str]:
        """POST line protocol; the HTTP status and InfluxDB's error text ("" when written)."""
        s = self.settings
        query = urllib.parse.urlencode({"db": database, "precision": precision})
        request = urllib.request.Request(
            f"{s.influx_base_url}/write?{query}", data="\n".join(lines).encode()
        )
        request.add_header(
            "Authorization", basic_auth(s.influx_username, s.influx_password.reveal())
        )
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.tls_context) as response:
                return response.status, ""
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def create_database(self, name: str) -> None:
        """A pipeline database (the stack's, a test's or a demo run's): the connector may only
        write it, Grafana's user only read it."""
        self.execute(f'CREATE DATABASE "{name}"', f"create database {name}")
        for user, privilege in INFLUX_RIGHTS.items():
            self.execute(
                f'GRANT {privilege} ON "{name}" TO "{user}"',
                f"grant {privilege} on {name} to {user}",
            )

    def drop_database(self, name: str) -> None:
        self.execute(f'DROP DATABASE "{name}"', f"drop database {name}")
