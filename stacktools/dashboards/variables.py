"""Template variable options and the selection Grafana makes from them.

A variable's query returns raw values; Grafana filters them with the variable's regex, sorts
them, then picks the saved value, the first option or All. Panels see only the result, so a
wrong choice here would check other queries than a user gets.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from stacktools.dashboards.model import Selection

#: The value Grafana saves for an "All" selection.
ALL_VALUE = "$__all"


def js_regex(text: str) -> re.Pattern[str]:
    """A Grafana variable regex ('/pattern/flags') as a Python pattern."""
    match = re.fullmatch(r"/(.*)/([gimsuy]*)", text.strip(), re.DOTALL)
    if not match:
        raise ValueError("expected /pattern/flags")
    flags = (re.IGNORECASE if "i" in match.group(2) else 0) | (
        re.MULTILINE if "m" in match.group(2) else 0
    )
    return re.compile(
        match.group(1).replace("(?<", "(?P<").replace("(?P<=", "(?<=").replace("(?P<!", "(?<!"),
        flags,
    )


def apply_variable_regex(values: Sequence[str], regex: str) -> list[str]:
    """Grafana's variable regex: keep matching values; a capture group (or ``value``) replaces the
    value."""
    if not regex:
        return list(values)
    pattern = js_regex(regex)
    kept: list[str] = []
    for value in values:
        match = pattern.search(value)
        if not match:
            continue
        groups = match.groupdict()
        chosen = (
            groups.get("value")
            or groups.get("text")
            or (match.group(1) if match.groups() else value)
        )
        if chosen is not None and chosen not in kept:
            kept.append(chosen)
    return kept


def sort_options(values: Sequence[str], sort: int) -> list[str]:
    """Grafana's variable sort: 0 none, 1/2 alphabetical, 3/4 numerical, 5/6 case-insensitive."""

    def number(value: str) -> float:
        match = re.search(r"-?\d+(?:\.\d+)?", value)
        return float(match.group(0)) if match else math.inf

    keys: dict[int, Callable[[str], Any]] = {
        1: str,
        2: str,
        3: number,
        4: number,
        5: str.lower,
        6: str.lower,
    }
    if sort not in keys:
        return list(values)
    return sorted(values, key=keys[sort], reverse=sort in {2, 4, 6})


def default_selection(variable: Mapping[str, Any], options: Sequence[str]) -> Selection:
    """Grafana's choice when the URL says nothing: the saved current value if it is still an
    option (or All), else the first entry of the list, which is "All" when the variable has it."""
    current = (variable.get("current") or {}).get("value")
    wanted = [current] if isinstance(current, str) else list(current or [])
    if variable.get("includeAll") and ALL_VALUE in wanted:
        return Selection((), True, tuple(options))
    kept = tuple(v for v in wanted if v in options)
    if kept:
        return Selection(kept if variable.get("multi") else kept[:1], False, tuple(options))
    if variable.get("includeAll"):
        return Selection((), True, tuple(options))
    return Selection(tuple(options[:1]), False, tuple(options))


def given_selection(given: str | Sequence[str], options: Sequence[str]) -> Selection:
    """A value pinned by the caller (like a ``var-name`` URL parameter); All in any spelling."""
    values = [given] if isinstance(given, str) else list(given)
    if any(v in {ALL_VALUE, "All", "__all"} for v in values):
        return Selection((), True, tuple(options))
    return Selection(tuple(values), False, tuple(options) or tuple(values))
