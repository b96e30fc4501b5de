"""Mosquitto's users: the lines of its password file, made here (no password on a command line;
the launcher's Mosquitto component writes the file, for compose too), and the machine users of
MQTT_MACHINE_IDENTITIES (one per Thing, made on demand).

The password file has Mosquitto 2's format, as ``mosquitto_passwd`` writes it: one line per
user, ``user:$7$<iterations>$<base64 salt>$<base64 hash>``, the hash PBKDF2-HMAC-SHA512 of the
password over a random 12-byte salt, 64 bytes long (tests/stacktools/test_mosquitto.py checks
a line against ``mosquitto_passwd``'s own). Every password the launcher makes is random
(144 bits), so Mosquitto's default of 101 iterations costs nothing and protects enough.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path

from stacktools.compose.credentials import new_password
from stacktools.stack.access import USERS
from streamkit.config import MqttSettings
from streamkit.events_source import SourceStats, read_rows
from streamkit.identifiers import thing_problem
from streamkit.paths import private_directory, private_file

#: What ``mosquitto_passwd`` uses (Mosquitto 2.0's PW_DEFAULT_ITERATIONS and salt length).
ITERATIONS = 101
SALT_BYTES = 12


def password_line(user: str, password: str, *, salt: bytes | None = None) -> str:
    """One line of Mosquitto's password file (without its newline)."""
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, ITERATIONS, 64)
    encoded = base64.b64encode
    return f"{user}:$7${ITERATIONS}${encoded(salt).decode()}${encoded(digest).decode()}"


def machine_user_problem(thing: str) -> str | None:
    """Why ``thing`` cannot be a machine user's name; None when it can."""
    problem = thing_problem(thing)
    if problem is not None:
        return problem
    if ":" in thing:
        return f"Thing {thing[:40]!r} holds ':', the separator of Mosquitto's password file"
    if thing in USERS["mqtt"]:
        return f"Thing {thing!r} is the name of a service's MQTT user"
    return None


def machine_passwords(settings: MqttSettings) -> dict[str, str]:
    """Every machine user made so far: Thing -> password."""
    path = settings.machine_credentials_path
    if not path.is_file():
        return {}
    stored = json.loads(path.read_text(encoding="utf-8"))
    return {str(thing): str(password) for thing, password in stored.items()}


def ensure_machine_users(settings: MqttSettings, things: Iterable[str]) -> list[str]:
    """A password for each Thing that has none yet, kept in <run dir>/machine-credentials.json
    (0600); returns the Things made now. ValueError naming a Thing that cannot be a user."""
    wanted = list(dict.fromkeys(things))
    problems = [p for p in map(machine_user_problem, wanted) if p]
    if problems:
        raise ValueError("; ".join(problems))
    stored = machine_passwords(settings)
    made = [thing for thing in wanted if thing not in stored]
    if made:
        stored.update((thing, new_password()) for thing in made)
        private_directory(settings.run_dir)
        with private_file(settings.machine_credentials_path) as out:
            out.write(json.dumps(stored, ensure_ascii=False, indent=0).encode())
    return made


def things_of(events: Path) -> list[str]:
    """Every Thing of an events file's valid rows, in order of appearance."""
    return list(dict.fromkeys(row.thing for row in read_rows(events, SourceStats())))
