"""The container engine's service is reused across runs, but not one started from a checkout
that is gone (its podman settings file removed, or its working directory, when the clone was
made anew in its place): every build or start would fail on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stacktools.compose import engine as container_engine


def sleeper(conf: Path, cwd: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, "CONTAINERS_CONF": str(conf)},
        cwd=cwd,
    )


@pytest.mark.parametrize("gone", [True, False])
def test_a_service_whose_settings_file_is_gone_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gone: bool
) -> None:
    conf = tmp_path / "containers.conf"
    if not gone:
        conf.write_text("[engine]\n")
    monkeypatch.setattr(container_engine, "STATE_DIR", tmp_path)
    process = sleeper(conf)
    try:
        (tmp_path / "podman.pid").write_text(str(process.pid))
        assert container_engine._stale() is gone
    finally:
        process.kill()
        process.wait()
    assert container_engine._stale() is False  # no service: nothing stale


@pytest.mark.parametrize("gone", [True, False])
def test_a_service_whose_working_directory_is_gone_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gone: bool
) -> None:
    """A clone removed and made anew at the same path: the settings file is there again, the
    service's working directory is the removed one."""
    conf, checkout = tmp_path / "containers.conf", tmp_path / "checkout"
    conf.write_text("[engine]\n")
    checkout.mkdir()
    monkeypatch.setattr(container_engine, "STATE_DIR", tmp_path)
    process = sleeper(conf, cwd=checkout)
    try:
        (tmp_path / "podman.pid").write_text(str(process.pid))
        if gone:
            checkout.rmdir()
            checkout.mkdir()  # cloned anew in its place
        assert container_engine._stale() is gone
    finally:
        process.kill()
        process.wait()
