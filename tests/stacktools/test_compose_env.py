"""The compose .env generator, the one password rule, and the wall between compose's .env
passwords and the local stack's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stacktools.compose import env as compose_env
from stacktools.compose.credentials import PLACEHOLDER, password_problem
from stacktools.stack import Stack, StackError
from stacktools.stack.settings import Settings
from streamkit import config
from streamkit.config import read_env_file
from streamkit.paths import REPO_ROOT


@pytest.mark.parametrize(
    "value, reason",
    [
        ("", "empty"),
        (PLACEHOLDER, "placeholder"),
        ("elevenchars", "11 characters"),
        ('twelve"chars', "contains"),
        ("with space here", "contains"),
    ],
)
def test_weak_passwords_are_refused_with_the_variable_named(value: str, reason: str) -> None:
    problem = password_problem("KAFKA_ADMIN_PASSWORD", value)
    assert problem and "KAFKA_ADMIN_PASSWORD" in problem and reason in problem


def test_generated_env_has_a_good_password_for_every_placeholder_and_a_new_cluster_id(
    tmp_path: Path,
) -> None:
    target = tmp_path / ".env"
    assert compose_env.main(["--output", str(target)]) == 0
    example, written = read_env_file(compose_env.EXAMPLE), read_env_file(target)
    assert written.keys() == example.keys()
    placeholders = [key for key, value in example.items() if value == PLACEHOLDER]
    assert len(placeholders) >= 13
    for key in placeholders:
        assert password_problem(key, written[key]) is None, key
    assert len({written[key] for key in placeholders}) == len(placeholders), (
        "a password was used twice"
    )
    assert (
        written["KAFKA_CLUSTER_ID"] != example["KAFKA_CLUSTER_ID"]
        and len(written["KAFKA_CLUSTER_ID"]) == 22
    )
    assert {
        k: v for k, v in written.items() if k not in placeholders and k != "KAFKA_CLUSTER_ID"
    } == {k: v for k, v in example.items() if k not in placeholders and k != "KAFKA_CLUSTER_ID"}
    assert target.stat().st_mode & 0o777 == 0o600
    assert PLACEHOLDER in compose_env.EXAMPLE.read_text(), ".env.example must keep its placeholders"


def test_an_existing_env_is_kept_and_checked(tmp_path: Path) -> None:
    target = tmp_path / ".env"
    target.write_text(compose_env.EXAMPLE.read_text())
    assert compose_env.main(["--output", str(target)]) == 1  # kept, and its placeholders reported
    assert target.read_text() == compose_env.EXAMPLE.read_text()
    assert compose_env.main(["--output", str(target), "--force"]) == 0
    assert compose_env.main(["--output", str(target), "--check"]) == 0


CLUSTER = "COMPOSE_PROFILES=cluster\nKAFKA_BROKERS=3\nKAFKA_SERVERS=" + compose_env.CLUSTER_SERVERS
#: What --check says when the schema registry's switches disagree, and when the cluster's do.
REGISTRY, NODES = "COMPOSE_PROFILES=registry", "COMPOSE_PROFILES=cluster, KAFKA_BROKERS=3"


@pytest.mark.parametrize(
    "lines, refused_by",
    [
        ("", None),
        ("SCHEMA_REGISTRY=true\nCOMPOSE_PROFILES=registry\n", None),
        ("SCHEMA_REGISTRY=true\nCOMPOSE_PROFILES=replay,registry\n", None),
        ("SCHEMA_REGISTRY=true\n", REGISTRY),
        ("COMPOSE_PROFILES=registry\n", REGISTRY),
        (CLUSTER + "\n", None),
        (CLUSTER.replace("=cluster", "=registry,cluster") + "\nSCHEMA_REGISTRY=true\n", None),
        ("COMPOSE_PROFILES=cluster\n", NODES),
        ("KAFKA_BROKERS=3\n", NODES),
        (CLUSTER.replace(",kafka-3:19092", "") + "\n", NODES),
        ("KAFKA_BROKERS=2\n", NODES),
    ],
)
def test_check_says_when_switches_that_go_together_disagree(
    tmp_path: Path, lines: str, refused_by: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The schema registry's two switches; the cluster profile's three lines."""
    target = tmp_path / ".env"
    assert compose_env.main(["--output", str(target)]) == 0
    target.write_text(target.read_text() + lines)
    assert compose_env.main(["--output", str(target), "--check"]) == int(bool(refused_by))
    said = capsys.readouterr().err
    assert [m for m in (REGISTRY, NODES) if m in said] == ([refused_by] if refused_by else [])


def test_the_generator_runs_with_a_bare_python(tmp_path: Path) -> None:
    """A Docker user runs it before installing anything: no third-party import may sneak in."""
    result = subprocess.run(
        [sys.executable, "-S", "-m", "stacktools.compose.env", "--output", str(tmp_path / "e")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO_ROOT)},
    )
    assert result.returncode == 0, result.stderr


def test_provisioning_refuses_placeholder_passwords_before_touching_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_ADMIN_PASSWORD", PLACEHOLDER)
    monkeypatch.setenv("INFLUX_GRAFANA_PASSWORD", "short")
    settings = Settings.from_sources(cli={"run_dir": tmp_path, "kafka_port": 1, "influx_port": 1})
    with pytest.raises(StackError) as refused:
        Stack(settings, ["kafka", "influxdb"]).provision(timeout_s=1)
    message = str(refused.value)
    assert "KAFKA_ADMIN_PASSWORD is still the placeholder" in message
    assert "INFLUX_GRAFANA_PASSWORD is 5 characters long" in message
    assert "KAFKA_BRIDGE_PASSWORD is empty" in message


def test_local_services_ignore_the_passwords_of_compose_s_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text(
        "KAFKA_PORT=19999\nKAFKA_ADMIN_PASSWORD=compose-admin-password\nMQTT_PASSWORD=compose-pw-1234\n"
    )
    monkeypatch.setattr(config, "dotenv_path", lambda: dotenv)
    for name in ("KAFKA_ADMIN_PASSWORD", "MQTT_PASSWORD", "KAFKA_PORT"):
        monkeypatch.delenv(name, raising=False)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "credentials.env").write_text("KAFKA_ADMIN_PASSWORD=local-admin-password\n")
    settings = Settings.from_sources(cli={"run_dir": run_dir})
    assert settings.kafka_port == 19999, "the non-secret settings of .env still apply"
    assert settings.credential("kafka", "admin").reveal() == "local-admin-password"
    assert (
        settings.kafka_password.reveal() == "local-admin-password"
        and settings.mqtt_password.reveal() != "compose-pw-1234"
    )
