"""What a generated credential looks like and what a given one must be: one rule for the local
launcher, the compose ``.env`` generator and compose's provisioning job. Standard library only,
so ``python3 -m stacktools.compose.env`` runs without the project's virtualenv."""

from __future__ import annotations

import base64
import secrets
import uuid

#: The placeholder of .env.example: never a password.
PLACEHOLDER = "change-me"
MIN_PASSWORD_LENGTH = 12
#: JAAS (Kafka) and .env files have no quoting that would carry these safely.
FORBIDDEN_CHARACTERS = frozenset("\"'\\ \t\n$`")


def new_password() -> str:
    """24 URL-safe characters (144 random bits)."""
    return secrets.token_urlsafe(18)


def new_cluster_id() -> str:
    """A random KRaft cluster id: a UUID in URL-safe base64 without padding (22 characters, as
    `kafka-storage.sh random-uuid` makes them); about one in 64 begins with "-"."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def password_problem(name: str, value: str) -> str | None:
    """Why ``value`` cannot be the password in variable ``name``; None when it can."""
    if not value:
        return f"{name} is empty: set it in .env (python3 -m stacktools.compose.env writes one)"
    if value == PLACEHOLDER:
        return (
            f"{name} is still the placeholder {PLACEHOLDER!r}: replace it in .env (python3 -m "
            "stacktools.compose.env)"
        )
    if len(value) < MIN_PASSWORD_LENGTH:
        return f"{name} is {len(value)} characters long: use at least {MIN_PASSWORD_LENGTH}"
    bad = sorted(set(value) & FORBIDDEN_CHARACTERS)
    if bad:
        return (
            f"{name} contains {''.join(bad)!r}: quotes, backslashes, '$', '`' and white space "
            "are not allowed"
        )
    return None
