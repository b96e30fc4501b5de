"""InfluxDB's retention policies: which policy holds each measurement the connector writes.

A measurement family lives as long as its readers need it (the raw points for a month, the
window means for a year), so each family has a policy of its own. The connector writes to it,
the launcher and compose's provisioning create it, and every query names it: one table, here in
the wire contract, for all three.
"""

from __future__ import annotations

#: Measurement -> the retention policy it is written to. Each policy's duration is a setting
#: (``INFLUX_RETENTION_<POLICY>``, docs/configuration.md).
POLICY_OF: dict[str, str] = {
    "raw": "raw",
    "joined": "joined",
    "aggregate": "windows",
    "opstats": "operation",
    "opstats_band": "operation",
    "overload": "operation",
    "late": "diagnostics",
    "dead_letter": "diagnostics",
}

#: Every policy, in the order of the table above.
POLICIES: tuple[str, ...] = tuple(dict.fromkeys(POLICY_OF.values()))
#: Where any other measurement goes: the policy InfluxDB makes with each database.
DEFAULT_POLICY = "autogen"


def policy_of(measurement: str) -> str:
    """The retention policy ``measurement`` is written to."""
    return POLICY_OF.get(measurement, DEFAULT_POLICY)


def by_policy(lines: list[str]) -> dict[str, list[int]]:
    """Indices of line-protocol ``lines`` per policy their measurements go to, in order. A
    line's measurement ends at its first comma or space (the pipeline's names need no escapes)."""
    groups: dict[str, list[int]] = {}
    for index, line in enumerate(lines):
        measurement = line.split(" ", 1)[0].split(",", 1)[0]
        groups.setdefault(policy_of(measurement), []).append(index)
    return groups


def source(measurement: str) -> str:
    """``measurement`` as an InfluxQL FROM clause names it: its policy and its name, quoted."""
    return f'"{policy_of(measurement)}"."{measurement}"'
