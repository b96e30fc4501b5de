"""The host checks of ``python3 -m stacktools.compose.env`` (stacktools.compose.host): the
Compose version read and judged, the compose file's bind mounts found, and files a strict
umask closed made readable for the containers' users. The checks at work on a real checkout:
tests/docker/test_checkout_host.py."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from stacktools.compose import host


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("2.40.3\n", (2, 40, 3)),
        ("v2.20.0", (2, 20, 0)),
        ("Docker Compose version v2.19.1", (2, 19, 1)),
        ("docker-compose version 1.29.2, build 5becea4c", (1, 29, 2)),
        ("no version here", None),
    ],
)
def test_a_compose_version_is_read_in_its_usual_spellings(
    text: str, version: tuple[int, int, int] | None
) -> None:
    assert host.parse_version(text) == version


def test_compose_older_than_2_20_or_missing_is_a_problem_newer_is_not() -> None:
    assert "too old" in (host.compose_problem((2, 19, 9)) or "")
    assert "too old" in (host.compose_problem((1, 29, 2)) or "")
    assert "no docker compose" in (host.compose_problem(None) or "")
    assert host.compose_problem((2, 20, 0)) is None
    assert host.compose_problem((2, 40, 3)) is None


def test_the_bind_mounts_are_read_from_the_compose_file() -> None:
    mounted = {
        path.relative_to(host.COMPOSE_FILE.parent).as_posix() for path in host.bind_mounted()
    }
    assert {"docker/kafka", "docker/influxdb", "grafana/provisioning", "data"} <= mounted
    # the line reader (standard library only) finds what a YAML parser finds
    services = yaml.safe_load(host.COMPOSE_FILE.read_text())["services"].values()
    parsed = {
        volume.split(":")[0].removeprefix("./")
        for service in services
        for volume in service.get("volumes") or []
        if isinstance(volume, str) and volume.startswith("./")
    }
    assert mounted == parsed


def test_files_a_strict_umask_closed_are_found_and_opened(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        config = tmp_path / "docker" / "kafka"
        config.mkdir(parents=True)
        (config / "entrypoint.sh").write_text("#!/bin/sh\n")
        single = tmp_path / "alerts.yml"
        single.write_text("groups: []\n")
    finally:
        os.umask(old)
    closed = host.unreadable_by_others([tmp_path / "docker", single])
    assert set(closed) == {tmp_path / "docker", config, config / "entrypoint.sh", single}
    host.make_readable(closed)
    assert host.unreadable_by_others([tmp_path / "docker", single]) == []
    assert stat.S_IMODE((config / "entrypoint.sh").stat().st_mode) & 0o044 == 0o044
