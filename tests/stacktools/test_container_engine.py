"""The container engine's service is reused across runs, but not one started from a checkout
that is gone (its podman settings file removed): every build would fail on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stacktools.compose import engine as container_engine


def sleeper(conf: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, "CONTAINERS_CONF": str(conf)},
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
