"""Synchronous batch writes to InfluxDB with influxdb-client, and what each failure means.

Synchronous on purpose: the connector commits Kafka offsets only for points InfluxDB has
acknowledged, so it must know the outcome of every write before moving on (the client's
default batching API reports failures only to callbacks, after the fact).

Two kinds of failure, handled differently:
- the *server* cannot take writes now (down, restarting, overloaded, auth or database not yet
  set up, its certificate refused, plain HTTP to its HTTPS port): :class:`WriteUnavailable`;
  the caller keeps the batch and retries it later;
- InfluxDB *refuses some points* (HTTP 400: a field type conflict, an unparsable line): the
  batch is bisected until each refused point is alone, so the others are written and each
  refused one is returned with InfluxDB's reason, for the dead-letter topic. Rewriting the
  accepted halves is harmless: a point rewritten with the same identity overwrites itself.

Each measurement goes to its family's retention policy (streamkit.wire.retention), one request
per policy. A point older than its policy keeps is dropped by InfluxDB, which answers 400
"points beyond retention policy" and writes the rest: that answer is a write done, the dropped
points counted as expired, never dead letters (they are not wrong, only out of the kept time).
"""

from __future__ import annotations

import json
import logging
import re
import urllib.error
import urllib.request
from dataclasses import dataclass

import urllib3
from influxdb_client import InfluxDBClient, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS
from influxdb_client.rest import ApiException
from prometheus_client import Counter

from db_connector.config import ConnectorSettings
from db_connector.errors import WriteUnavailable
from streamkit.durations import duration_ms
from streamkit.tls import client_context
from streamkit.wire import dead_letters as wire_dead_letters
from streamkit.wire.retention import by_policy

log = logging.getLogger("db_connector.influx")

#: Statuses meaning "these points are wrong": split the batch to find them.
REFUSED_STATUSES = {400, 413, 422}
#: What InfluxDB (Go) answers, with 400, to plain HTTP on its HTTPS port: not the points' fault.
PLAIN_HTTP_TO_HTTPS = "HTTP request to an HTTPS server"
#: InfluxDB's answer when it dropped points older than the policy keeps and wrote the others.
BEYOND_RETENTION = re.compile(r"points beyond retention policy dropped=(\d+)")
#: InfluxDB's answers for a point whose series would pass its cardinality limits
#: (max-series-per-database, max-values-per-tag: INFLUX_MAX_SERIES, INFLUX_MAX_TAG_VALUES).
SERIES_LIMITS = ("max-series-per-database limit exceeded", "max-values-per-tag limit exceeded")


def dead_letter_reason(refusal: str) -> str:
    """The dead-letter reason of a point InfluxDB refused, from its answer: a series past the
    limits is told apart, since its fix is not in the record (a machine flooding names, or a
    fleet grown past the limits)."""
    if any(limit in refusal for limit in SERIES_LIMITS):
        return wire_dead_letters.INFLUX_SERIES_LIMIT
    return wire_dead_letters.INFLUX_REJECTED


EXPIRED = Counter(
    "connector_expired_points_total",
    "points InfluxDB dropped as older than their retention policy keeps (not dead letters)",
    ["policy"],
)


@dataclass(frozen=True)
class Refused:
    index: int
    reason: str


def _error_text(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("error") or exc.body or exc.reason)
    except (ValueError, TypeError, AttributeError):
        return str(exc.body or exc.reason)


class InfluxWriter:
    def __init__(self, settings: ConnectorSettings) -> None:
        self.database = settings.influx_database
        self.url = settings.influx_base_url
        # InfluxDB 1.8's v2-compatible API: the token is user:password, the org is ignored ("-").
        self.client = InfluxDBClient(
            url=settings.influx_base_url,
            token=f"{settings.influx_username}:{settings.influx_password.reveal()}",
            org="-",
            verify_ssl=True,
            ssl_context=client_context(settings),  # the stack's CA only, with TLS on
            timeout=duration_ms(settings.write_timeout),
        )
        self.api = self.client.write_api(write_options=SYNCHRONOUS)

    def write(self, lines: list[str]) -> list[Refused]:
        """Write every line, each to its measurement's policy; return the refused ones (by
        index into ``lines``). Raises WriteUnavailable."""
        refused: list[Refused] = []
        for policy, indices in by_policy(lines).items():
            group = [lines[index] for index in indices]
            found: list[Refused] = []
            self._write_range(policy, group, 0, len(group), found)
            refused.extend(Refused(indices[item.index], item.reason) for item in found)
        refused.sort(key=lambda item: item.index)
        return refused

    def _write_range(
        self, policy: str, lines: list[str], start: int, end: int, refused: list[Refused]
    ) -> None:
        if start >= end:
            return
        status, text = self._post(policy, "\n".join(lines[start:end]).encode())
        if status is None:
            return
        expired = BEYOND_RETENTION.search(text)
        if expired:
            EXPIRED.labels(policy).inc(int(expired.group(1)))
            return
        if end - start == 1:
            refused.append(Refused(start, f"{status}: {text}"[:500]))
            return
        middle = (start + end) // 2
        self._write_range(policy, lines, start, middle, refused)
        self._write_range(policy, lines, middle, end, refused)

    def _post(self, policy: str, body: bytes) -> tuple[int | None, str]:
        """(None, "") when written; (status, reason) when InfluxDB refused or dropped points."""
        try:
            self.api.write(
                bucket=f"{self.database}/{policy}",
                record=body,
                # influxdb_client annotates the parameter with its class, whose members are str
                write_precision=WritePrecision.NS,  # type: ignore[arg-type]
            )
            return None, ""
        except ApiException as exc:
            text = _error_text(exc)
            if exc.status == 0:  # influxdb-client's wrapping of urllib3's SSLError
                raise WriteUnavailable(
                    "tls", f"InfluxDB failed the TLS checks ({text.strip()})"
                ) from None
            if PLAIN_HTTP_TO_HTTPS in text:
                raise WriteUnavailable(
                    "tls", f"InfluxDB speaks HTTPS and {self.url} is plain HTTP ({text.strip()})"
                ) from None
            if exc.status in REFUSED_STATUSES:
                return exc.status, text
            if exc.status in (401, 403):
                raise WriteUnavailable(
                    "auth", f"InfluxDB refused the credentials ({exc.status}: {text})"
                ) from None
            if exc.status == 404:
                raise WriteUnavailable(
                    "database", f"{text} (the stack launcher creates the database)"
                ) from None
            raise WriteUnavailable("server", f"HTTP {exc.status}: {text}") from None
        except (
            urllib3.exceptions.HTTPError,
            OSError,
        ) as exc:  # refused, reset, timed out: not reachable now
            if self._https_behind_plain_url():
                raise WriteUnavailable(
                    "tls", f"InfluxDB speaks HTTPS and {self.url} is plain HTTP ({exc})"
                ) from None
            raise WriteUnavailable("connection", f"{type(exc).__name__}: {exc}") from None

    def _https_behind_plain_url(self) -> bool:
        """Whether a plain-HTTP URL reaches an HTTPS server. InfluxDB answers such a request
        with 400 and closes; a write's body may still be on its way then, and the client sees a
        reset instead of the answer. A bodiless ping reads the answer, so a misconfigured URL
        is reported as such, not as a server that cannot be reached."""
        if not self.url.startswith("http://"):
            return False
        try:
            with urllib.request.urlopen(f"{self.url}/ping", timeout=2):
                return False
        except urllib.error.HTTPError as answer:
            return answer.code == 400 and PLAIN_HTTP_TO_HTTPS in answer.read().decode(
                "utf-8", "replace"
            )
        except OSError:
            return False

    def close(self) -> None:
        self.client.close()
