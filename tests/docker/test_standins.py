"""The stand-ins fail where the official images fail (docker/standins): compose's options run
through the image's own launcher. The registry's image (Apicurio on ubi9/openjdk-17-runtime)
starts the JVM through run-java.sh, which adds a collector of its own unless
GC_CONTAINER_OPTIONS names one; a collector also given in JAVA_OPTS_APPEND stops the JVM, which
is how compose's former setting failed with the real image while its stand-in started."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from stacktools.compose import engine as container_engine
from stacktools.stack.servers.registry import REGISTRY_JVM_OPTIONS
from streamkit.paths import REPO_ROOT
from tests.support.compose import build_images
from tests.support.require import cannot_run

pytestmark = pytest.mark.containers

COMPOSE = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]
REGISTRY = COMPOSE["schema-registry"]
#: What compose gave the registry until the collector moved to GC_CONTAINER_OPTIONS: every
#: option in JAVA_OPTS_APPEND.
FORMER = {"JAVA_OPTS_APPEND": " ".join(REGISTRY_JVM_OPTIONS)}
NOW = {key: REGISTRY["environment"][key] for key in ("GC_CONTAINER_OPTIONS", "JAVA_OPTS_APPEND")}


def jvm_start(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The registry image's launcher with ``environment``, its JVM asked for its version only:
    the JVM checks every option, then prints its version and exits, so no registry starts."""
    if not shutil.which("podman"):
        cannot_run("podman is missing: scripts/setup-containers.sh installs it")
    env = {**environment, "JAVA_OPTS_APPEND": environment["JAVA_OPTS_APPEND"] + " -version"}
    flags = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
    return subprocess.run(
        ["podman", "run", "--rm", "--network", "none", *flags, REGISTRY["image"]],
        env={**os.environ, **container_engine.engine_env()},  # podman's settings for here
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_registry_s_former_collector_setting_stops_its_jvm_and_the_current_one_starts() -> None:
    build_images()
    former = jvm_start(FORMER)
    assert former.returncode != 0, former.stdout + former.stderr
    assert "Multiple garbage collectors selected" in former.stdout + former.stderr
    now = jvm_start(NOW)
    assert now.returncode == 0, now.stdout + now.stderr
    assert 'openjdk version "17' in now.stderr, now.stderr
