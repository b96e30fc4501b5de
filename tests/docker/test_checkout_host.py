"""A checkout made the way some hosts make it still starts: Git for Windows' line endings
(``core.autocrlf=true``) and a strict umask (077). The repository's .gitattributes keeps every
text file LF, so the entry scripts and configurations that compose bind-mounts into Linux
containers run there (with CRLF, busybox's and bash's ``set`` stop at the carriage return and
Kafka and Mosquitto crash-loop); ``python3 -m stacktools.compose.env``, run in the checkout as
docs/containers.md says, makes the bind-mounted files readable for the images' users (Kafka's is
uid 1000, which cannot read a file only its owner may)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacktools.compose import engine as container_engine
from streamkit.paths import REPO_ROOT
from tests.support.compose import ComposeProject, build_images, free_published_ports

pytestmark = pytest.mark.containers

#: Bytes kept as they are (.gitattributes): the fuzzers' seeds hold CRLF on purpose.
KEPT_AS_BYTES = ("tests/fuzz/corpus/", "tests/fuzz/crashes/")


def strict_umask() -> None:
    os.umask(0o077)


def host_checkout(target: Path) -> Path:
    """A clone of this repository's HEAD with Windows' line-ending setting, under umask 077."""
    subprocess.run(
        ["git", "clone", "--quiet", "-c", "core.autocrlf=true", str(REPO_ROOT), str(target)],
        check=True,
        capture_output=True,
        timeout=300,
        preexec_fn=strict_umask,
    )
    return target


def text_files_with_cr(checkout: Path) -> list[str]:
    """Files the clone holds with a carriage return where the repository has none."""
    listed = subprocess.run(
        ["git", "ls-files", "--eol"], cwd=checkout, check=True, capture_output=True, text=True
    ).stdout
    return [
        line.split("\t", 1)[1]
        for line in listed.splitlines()
        if "w/crlf" in line and not line.split("\t", 1)[1].startswith(KEPT_AS_BYTES)
    ]


def prepare_as_a_user(checkout: Path, env_file: Path) -> str:
    """``python3 -m stacktools.compose.env`` run in the checkout, on its own code."""
    done = subprocess.run(
        [sys.executable, "-m", "stacktools.compose.env", "--output", str(env_file)],
        cwd=checkout,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def project(tmp_path: Path) -> Iterator[ComposeProject]:
    build_images()
    container_engine.start()
    checkout = host_checkout(tmp_path / "checkout")
    compose = ComposeProject(
        f"mdhost{os.getpid()}", tmp_path, free_published_ports(), checkout=checkout
    )
    try:
        yield compose
    finally:
        compose.down()


def test_a_checkout_with_windows_line_endings_and_a_strict_umask_starts_kafka_and_mosquitto(
    project: ComposeProject, tmp_path: Path
) -> None:
    checkout = project.checkout
    assert text_files_with_cr(checkout) == []
    entrypoint = checkout / "docker" / "kafka" / "entrypoint.sh"
    assert entrypoint.stat().st_mode & 0o044 == 0, "the umask did not close the checkout"
    said = prepare_as_a_user(checkout, tmp_path / "user.env")
    assert "readable for the containers' users" in said, said
    assert entrypoint.stat().st_mode & 0o004
    project.run("up", "--detach", "kafka", "mosquitto", timeout_s=600)
    project.wait_ready(("kafka", "mosquitto"), ("certs",), timeout_s=300)
