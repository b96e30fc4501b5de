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
from collections.abc import Mapping
from datetime import timedelta

from stacktools.stack.access import INFLUX_RIGHTS
from stacktools.stack.errors import InfluxError
from streamkit.config import InfluxSettings
from streamkit.tls import client_context
from streamkit.wire.retention import POLICIES, by_policy


def basic_auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


#: The shortest retention policy InfluxDB accepts.
SHORTEST_RETENTION = timedelta(hours=1)


def influx_duration(policy: str, keep: timedelta) -> str:
    """``keep`` as an InfluxQL policy duration: INF for zero, whole seconds otherwise."""
    if not keep:
        return "INF"
    if keep < SHORTEST_RETENTION:
        raise InfluxError(
            f"retention policy {policy}: InfluxDB keeps points at least 1h, not {keep} "
            f"(INFLUX_RETENTION_{policy.upper()})"
        )
    return f"{int(keep.total_seconds())}s"


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
        self, database: str, lines: list[str], precision: str = "ns", policy: str = ""
    ) -> tuple[int, str]:
        """POST line protocol, each measurement to its retention policy (or all to ``policy``);
        the HTTP status and InfluxDB's error text ("" when written) of the first request that
        was not 204."""
        groups = {policy: list(range(len(lines)))} if policy else by_policy(lines)
        for policy, indices in groups.items():
            status, text = self._post_lines(
                database, policy, [lines[index] for index in indices], precision
            )
            if status != 204:
                return status, text
        return 204, ""

    def _post_lines(
        self, database: str, policy: str, lines: list[str], precision: str
    ) -> tuple[int, str]:
        s = self.settings
        query = urllib.parse.urlencode({"db": database, "rp": policy, "precision": precision})
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

    def create_database(self, name: str, retention: Mapping[str, timedelta]) -> None:
        """A pipeline database (the stack's, a test's or a demo run's) with its retention
        policies (``retention``: policy -> how long, zero for forever; an existing policy gets
        the duration): the connector may only write it, Grafana's user only read it."""
        self.execute(f'CREATE DATABASE "{name}"', f"create database {name}")
        existing = {row["name"] for row in self.rows(name, f'SHOW RETENTION POLICIES ON "{name}"')}
        for policy, keep in retention.items():
            duration = influx_duration(policy, keep)
            verb = "ALTER" if policy in existing else "CREATE"
            extra = "" if policy in existing else " REPLICATION 1"
            self.execute(
                f'{verb} RETENTION POLICY "{policy}" ON "{name}" DURATION {duration}{extra}',
                f"{verb.lower()} retention policy {policy} on {name}",
            )
        for user, privilege in INFLUX_RIGHTS.items():
            self.execute(
                f'GRANT {privilege} ON "{name}" TO "{user}"',
                f"grant {privilege} on {name} to {user}",
            )

    def create_scratch_database(self, name: str) -> None:
        """A database for a replay of files' own times (a test's, a demo run's, a benchmark's):
        every policy keeps its points forever, since InfluxDB drops at once a point older than
        a bounded policy keeps, and a file's times are its recording's."""
        self.create_database(name, {policy: timedelta(0) for policy in POLICIES})

    def drop_database(self, name: str) -> None:
        self.execute(f'DROP DATABASE "{name}"', f"drop database {name}")
