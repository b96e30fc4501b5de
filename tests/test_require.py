"""tests.support.require.cannot_run: a skip outside CI, a failure in it."""

from __future__ import annotations

import pytest

from tests.support.require import cannot_run


@pytest.mark.parametrize("value", ["", "false", "0"])
def test_outside_ci_a_test_that_cannot_run_skips(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception, match="no broker to restart"):
        cannot_run("no broker to restart")


@pytest.mark.parametrize("value", ["true", "1", "TRUE"])
def test_in_ci_a_test_that_cannot_run_fails(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="cannot run in CI: no broker to restart"):
        cannot_run("no broker to restart")


def test_without_the_variable_a_test_that_cannot_run_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        cannot_run("no container engine")
