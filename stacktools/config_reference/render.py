"""The configuration reference as Markdown: each section's table of settings, the users and
their password variables, what docker compose sets, the other variables; and the check that an
environment variable means one thing across the settings classes.

The output must not depend on the machine or the environment: defaults are taken from the
dataclass fields (never from ``from_sources``), paths inside the repository are shown relative
to it, and secrets are never shown.
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Iterable, Sequence
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from stacktools.config_reference.sections import SECTIONS, Section, all_settings_classes
from stacktools.config_reference.texts import HEADER, OTHER_VARIABLES, PROGRAMS_RUN
from stacktools.harness.services import SERVICES
from stacktools.stack.access import USERS
from streamkit.config import CREDENTIALS_FILE, SYSTEMS
from streamkit.fields import (
    choices_of,
    credential_env,
    default_text,
    identity_fields,
    legacy_option,
)
from streamkit.fields import option_of as field_option
from streamkit.paths import REPO_ROOT
from streamkit.secret import Secret
from streamkit.sizes import ByteSize

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"


_TYPE_NAMES = {
    bool: "bool",
    int: "int",
    float: "float",
    str: "string",
    Path: "path",
    timedelta: "duration",
    ByteSize: "size",
    Secret: "secret",
}


def env_of(field: dataclasses.Field) -> str:
    return field.metadata["env"]


def option_of(field: dataclasses.Field, kind: Any) -> str:
    option = field_option(field.name)
    return f"{option}, --no-{option[2:]}" if kind is bool else option


# ----------------------------------------------------------------------------- markdown helpers
def cell(text: str) -> str:
    """Plain text in a table cell: pipes split cells, and `<x>` / `*` would be read as HTML or
    emphasis by GitHub."""
    return text.replace("|", "\\|").replace("<", "\\<").replace("*", "\\*").replace("\n", " ")


def code(text: str) -> str:
    """A code span in a table cell (GFM needs the pipe escaped even there)."""
    return f"`{text.replace('|', chr(92) + '|')}`"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def format_default(field: dataclasses.Field, kind: Any) -> str:
    """The default as ``--help`` shows it (:func:`streamkit.fields.default_text`)."""
    if field.metadata.get("secret"):
        return "(generated)"
    text = default_text(field, kind)
    return code(text) if text else "(empty)"


# ----------------------------------------------------------------------------- settings rows
def settings_rows(section: Section) -> list[list[str]]:
    hints = get_type_hints(section.settings_class())
    rows = []
    for field in section.own_fields():
        kind = hints[field.name]
        secret = bool(field.metadata.get("secret"))
        help_text = field.metadata.get("help", "")
        if secret:
            help_text += "; see *Users and passwords*"
        if legacy := field.metadata.get("legacy_env"):
            unit = field.metadata["legacy_unit"]
            help_text += (
                f" (formerly {legacy} and {legacy_option(field)}, a number of {unit}; see "
                "*Renamed durations*)"
            )
        type_name = " \\| ".join(choices_of(kind)) or _TYPE_NAMES.get(kind, str(kind))
        rows.append(
            [
                code(option_of(field, kind)),
                code(env_of(field)),
                type_name,
                format_default(field, kind),
                cell(help_text),
            ]
        )
    return rows


# ----------------------------------------------------------------------------- compose
def compose_app_environment(path: Path = COMPOSE_FILE) -> dict[str, str]:
    """What docker-compose.yml sets for every application container (its ``x-app-env``)."""
    if not path.is_file():
        return {}
    document = yaml.safe_load(path.read_text()) or {}
    return {str(k): str(v) for k, v in (document.get("x-app-env") or {}).items()}


def console_scripts(path: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """The names of ``[project.scripts]`` (an installed copy has no pyproject.toml: then the
    installed distribution's)."""
    if path.is_file():
        with path.open("rb") as handle:
            return list(tomllib.load(handle)["project"]["scripts"])
    installed = {entry.name for entry in metadata.entry_points(group="console_scripts")}
    return [name for name in PROGRAMS_RUN if name in installed]


def program_rows() -> str:
    rows = []
    for name in console_scripts():
        module, purpose = PROGRAMS_RUN[name]
        rows.append(f"| `{name}` | `python -m {module}` | {purpose} |")
    return "\n".join(rows)


PER_SERVICE_FIELDS = {identity_fields(system)[0] for system in SYSTEMS} | {"metrics_port"}


def defaults_of(section: Section) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(section.settings_class())}


def users_and_passwords() -> list[str]:
    """Which password variable belongs to which user (stacktools/stack/access.py)."""
    lines = [
        "## Users and passwords",
        "",
        "Each service logs in to Kafka, MQTT and InfluxDB as a user of its own, with only the "
        "rights it needs (the README's access matrix). Each user's password is one variable; the "
        f"stack launcher generates every missing one into `<run dir>/{CREDENTIALS_FILE}` (mode "
        "0600) on `up`, and docker compose requires them in `.env`. `KAFKA_PASSWORD`, "
        "`MQTT_PASSWORD` and `INFLUX_PASSWORD` override the password of the one process they are "
        "given to.",
        "",
    ]
    logins: dict[tuple[str, str], list[str]] = {}
    for section in SECTIONS:
        cls = section.settings_class()
        defaults: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(cls)}
        for system in cls.systems():
            username = identity_fields(system)[0]
            # listed where a class sets its own user, not again in classes that inherit it
            inherited = [p for p in section.parents() if username in defaults_of(p)]
            if not inherited:  # the concern that declares the field (and its shared default, admin)
                continue
            nearest = max(inherited, key=lambda p: len(p.settings_class().__mro__))
            if defaults[username] != defaults_of(nearest)[username]:
                logins.setdefault((system, defaults[username]), []).append(
                    section.title.split(" (")[0]
                )
    lines += table(
        ["server", "user", "password variable", "default user of"],
        (
            [
                system,
                code(user),
                code(credential_env(system, user)),
                ", ".join(
                    logins.get(
                        (system, user),
                        ["the stack launcher, tools and tests"]
                        if user == "admin"
                        else ["the server itself"],
                    )
                ),
            ]
            for system, users in USERS.items()
            for user in users
        ),
    )
    lines += [
        "",
        "The `*_USERNAME` variables choose another user for one process; each service's default is "
        "the user shown here.",
        "",
    ]
    return lines


def render() -> str:
    lines = [HEADER.replace("@PROGRAMS@", program_rows()).rstrip("\n"), ""]
    lines += ["## Contents", ""]
    lines += [f"- {section.title}" for section in SECTIONS]
    lines += [
        "- Users and passwords",
        "- Set by docker compose",
        "- Other environment variables",
        "",
    ]
    for section in SECTIONS:
        lines += [f"## {section.title}", "", section.intro, ""]
        if not section.concern:
            has, lacks, also = section.concerns()
            lines += [
                f"**Has:** {', '.join(c.name for c in [*has, *also])} settings"
                + (f" (not: {', '.join(c.name for c in lacks)})" if lacks else " (every concern)")
                + ", each in its section above, and the ones below.",
                "",
            ]
        if section.service:
            lines += [
                (
                    f"Metrics: `/metrics` on port {SERVICES[section.service].metrics_port} by "
                    f"default, service label `{section.service}`."
                ),
                "",
            ]
        rows = settings_rows(section)
        if rows:
            lines += table(["option", "environment", "type", "default", "meaning"], rows)
        else:
            lines.append("No settings of its own.")
        lines.append("")
    lines += users_and_passwords()
    compose = compose_app_environment()
    if compose:
        lines += [
            "## Set by docker compose",
            "",
            (
                "`docker-compose.yml` sets these for every container built from our `Dockerfile` "
                "(its `x-app-env`), on top of `.env`; each service also gets its own "
                "`METRICS_PORT` and ignores the variables of concerns it does not have. `${X:-d}` "
                "is compose's default, `${X:?...}` a variable it requires."
            ),
            "",
        ]
        lines += table(
            ["environment", "value in compose"], ([code(k), code(v)] for k, v in compose.items())
        )
        lines.append("")
    lines += [
        "## Other environment variables",
        "",
        "Read outside the Settings classes (no command-line option):",
        "",
    ]
    lines += table(
        ["environment", "read by", "meaning"],
        ([code(name), cell(where), cell(meaning)] for name, where, meaning in OTHER_VARIABLES),
    )
    lines.append("")
    return "\n".join(lines)


def env_conflicts() -> list[str]:
    """An environment name must mean one thing: one field name, one default, across classes."""
    meanings: dict[str, set[tuple[str, str]]] = {}
    for cls in all_settings_classes():
        names = [env_of(f) for f in dataclasses.fields(cls)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            return [f"{cls.__name__}: several fields share {duplicates}"]
        for field in dataclasses.fields(cls):
            if field.name in PER_SERVICE_FIELDS:  # each service has its own user and port by design
                continue
            meanings.setdefault(env_of(field), set()).add((field.name, repr(field.default)))
    return [
        f"{env}: {sorted(values)}" for env, values in sorted(meanings.items()) if len(values) > 1
    ]
