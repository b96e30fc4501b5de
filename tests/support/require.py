"""When a test cannot run: a skip on a developer's machine, a failure in CI.

A chaos, fault, stack or container test that skips passes silently; in CI that would let a
run pass without ever exercising what it exists for (a broker the launcher cannot restart, no
container engine, a missing install). CI sets ``CI`` (true/1/yes); there the same reason fails.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

#: Values of ``CI`` that mean "this is a CI run" (GitHub, GitLab and most others set "true").
_TRUE = {"1", "true", "yes", "on"}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in _TRUE


def cannot_run(reason: str) -> NoReturn:
    """Skip with ``reason``, or fail with it when running in CI."""
    if in_ci():
        pytest.fail(f"cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)
