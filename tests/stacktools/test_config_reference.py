"""docs/configuration.md is rendered from the Settings classes and must stay in step with them."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stacktools.config_reference import cli, render, sections, texts
from stacktools.stack.access import USERS
from stacktools.stack.settings import Settings
from streamkit.config import ServiceSettings
from streamkit.fields import credential_env
from streamkit.paths import REPO_ROOT

DOC = REPO_ROOT / "docs" / "configuration.md"
PACKAGES = ("streamkit", "simulator", "mqtt_bridge", "spark_jobs", "db_connector", "stacktools")


def table_rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ")]


def test_checked_in_reference_is_up_to_date() -> None:
    assert DOC.is_file(), f"{DOC} is missing: run python -m stacktools.config_reference"
    assert DOC.read_text() == render.render(), (
        "docs/configuration.md is stale: run python -m stacktools.config_reference"
    )
    assert cli.main(["--check"]) == 0


def test_check_fails_on_a_stale_file_and_rendering_is_repeatable(tmp_path: Path) -> None:
    target = tmp_path / "configuration.md"
    assert cli.main(["--check", "--output", str(target)]) == 1  # missing
    assert cli.main(["--output", str(target)]) == 0
    assert cli.main(["--check", "--output", str(target)]) == 0
    target.write_text(target.read_text().replace("`KAFKA_PORT`", "`KAFKA_PORTS`"))
    assert cli.main(["--check", "--output", str(target)]) == 1
    assert render.render() == render.render()


def test_module_entry_point_checks() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stacktools.config_reference", "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_every_settings_class_in_the_code_is_documented() -> None:
    """A new *Settings class anywhere in the services must get a section."""
    declared = set()
    for package in PACKAGES:
        for path in (REPO_ROOT / package).rglob("*.py"):
            declared.update(
                re.findall(r"^class (\w*Settings)\(", path.read_text(), flags=re.MULTILINE)
            )
    documented = {cls.__name__ for cls in sections.all_settings_classes()}
    assert declared, "no Settings classes found: the scan is broken"
    assert declared <= documented, (
        f"Settings classes without a section: {sorted(declared - documented)}"
    )
    for cls in sections.all_settings_classes():
        assert issubclass(cls, ServiceSettings)


def test_every_field_appears_with_its_option_and_env_variable() -> None:
    rows = table_rows(DOC.read_text())
    for cls in sections.all_settings_classes():
        for field in dataclasses.fields(cls):
            env = field.metadata.get("env")
            assert env, f"{cls.__name__}.{field.name} has no environment variable"
            option = "--" + field.name.replace("_", "-")
            matching = [
                row
                for row in rows
                if f"`{env}`" in row and (f"`{option}`" in row or f"`{option}," in row)
            ]
            assert len(matching) == 1, (
                f"{cls.__name__}.{field.name}: expected one row with {option} and {env}"
            )
            assert field.metadata.get("help", "").split()[0] in matching[0]


def test_each_field_is_documented_once_and_base_fields_are_not_repeated() -> None:
    rows = table_rows(DOC.read_text())
    for env in {
        field.metadata["env"]
        for cls in sections.all_settings_classes()
        for field in dataclasses.fields(cls)
    }:
        settings_rows = [
            row for row in rows if row.startswith(("| `--",)) and f"| `{env}` |" in row
        ]
        assert len(settings_rows) == 1, f"{env} documented {len(settings_rows)} times"


def test_env_variable_names_are_unique_per_meaning() -> None:
    """The same name must never mean two fields or have two defaults in different services."""
    assert render.env_conflicts() == []
    seen: dict[str, tuple[str, object]] = {}
    for cls in sections.all_settings_classes():
        for field in dataclasses.fields(cls):
            env = field.metadata["env"]
            # each service has its own user and port by design
            if field.name in render.PER_SERVICE_FIELDS:
                continue
            meaning = (field.name, field.default)
            assert seen.setdefault(env, meaning) == meaning, (
                f"{env}: {seen[env]} vs {meaning} in {cls.__name__}"
            )


def test_env_conflicts_are_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamkit.fields import setting

    @dataclasses.dataclass(frozen=True)
    class Clashing(Settings):
        other_port: int = setting(1, "KAFKA_PORT", "clashes with Settings.kafka_port")

    @dataclasses.dataclass(frozen=True)
    class OtherDefault(Settings):
        kafka_port: int = setting(19092, "KAFKA_PORT", "same name, another default")

    documented = sections.all_settings_classes()
    for extra in (Clashing, OtherDefault):
        monkeypatch.setattr(
            render, "all_settings_classes", lambda extra=extra: [*documented, extra]
        )
        assert any("KAFKA_PORT" in problem for problem in render.env_conflicts()), extra.__name__


def test_secrets_have_no_value_and_nothing_machine_specific_leaks() -> None:
    text = DOC.read_text()
    rows = table_rows(text)
    secrets = [
        f
        for cls in sections.all_settings_classes()
        for f in dataclasses.fields(cls)
        if f.metadata.get("secret")
    ]
    assert {f.metadata["env"] for f in secrets} >= {"MQTT_PASSWORD", "INFLUX_PASSWORD"}
    for field in secrets:
        row = next(r for r in rows if f"`{field.metadata['env']}`" in r and r.startswith("| `--"))
        assert "(generated)" in row
    assert str(REPO_ROOT) not in text  # paths are shown relative to the repository
    assert "`./run`" in text


def test_precedence_header_matches_the_loader() -> None:
    text = DOC.read_text()
    order = [
        text.index(marker)
        for marker in (
            "the command line (",
            "the process environment",
            "`.env` in the repository",
            "credentials.env` (the passwords",
            "the default in the tables",
        )
    ]
    assert order == sorted(order)


def test_service_options_are_all_fields(capsys: pytest.CaptureFixture[str]) -> None:
    """Every option a service's --help offers is a documented field (no argparse-only option)."""
    from simulator.cli import main as simulator_main
    from spark_jobs.aggregate import main as aggregate_main
    from spark_jobs.join import main as join_main

    rows = table_rows(DOC.read_text())
    for entry in (simulator_main, join_main, aggregate_main):
        with pytest.raises(SystemExit) as exited:
            entry(["--help"])
        assert exited.value.code == 0
        offered = set(
            re.findall(r"^\s+(--[a-z][a-z0-9-]*)", capsys.readouterr().out, flags=re.MULTILINE)
        )
        assert offered, entry.__module__
        for option in offered - {"--help"}:
            assert any(
                f"`{option}`" in row or f"`{option}," in row or f", {option}`" in row
                for row in rows
            ), f"{entry.__module__}: {option} is not a documented field"


def test_simulator_keeps_its_flags_and_checks(tmp_path: Path) -> None:
    from simulator.config import SimulatorSettings

    events = tmp_path / "events.json"
    events.write_text("")
    settings, _ = SimulatorSettings.parse(
        [
            "--input",
            str(events),
            "--rate",
            "5",
            "--no-progress",
            "--live",
            "--shift-per-loop",
            "--order",
            "file",
            "--loops",
            "0",
            "--sort-chunk-rows",
            "10",
        ]
    )
    assert (
        settings.rate,
        settings.progress,
        settings.live,
        settings.shift_per_loop,
        settings.order,
        settings.loops,
        settings.sort_chunk_rows,
    ) == (5.0, False, True, True, "file", 0, 10)
    settings.check()
    with pytest.raises(ValueError, match="exclude each other"):
        SimulatorSettings.parse(["--input", str(events), "--rate", "1", "--speed", "2"])[0].check()
    with pytest.raises(ValueError, match="required"):
        SimulatorSettings.from_sources(environ={}).check()
    assert (
        SimulatorSettings.from_sources(environ={"SIMULATOR_INPUT": str(events)}).input_path
        == events
    )


def test_other_variables_still_exist_and_do_not_shadow_settings() -> None:
    settings_envs = {
        f.metadata["env"]
        for cls in sections.all_settings_classes()
        for f in dataclasses.fields(cls)
    }
    roots = [REPO_ROOT / name for name in (*PACKAGES, "tests", "scripts", "benchmarks", "docker")]
    sources = [
        p
        for root in roots
        for p in root.rglob("*")
        if p.is_file() and p.suffix in {".py", ".sh", ".yml", ".conf"}
    ]
    sources += [REPO_ROOT / "docker-compose.yml", REPO_ROOT / ".env.example"]
    corpus = "\n".join(
        p.read_text(errors="replace") for p in sources if p.parent.name != "config_reference"
    )
    for name, _where, _meaning in texts.OTHER_VARIABLES:
        assert name not in settings_envs, f"{name} is a Settings variable: document it there"
        assert name in corpus, f"{name} is no longer read anywhere: drop it from OTHER_VARIABLES"


def test_env_example_names_are_all_documented() -> None:
    example = REPO_ROOT / ".env.example"
    names = re.findall(r"^([A-Z][A-Z0-9_]*)=", example.read_text(), flags=re.MULTILINE)
    documented = {
        f.metadata["env"]
        for cls in sections.all_settings_classes()
        for f in dataclasses.fields(cls)
    }
    documented |= {name for name, _w, _m in texts.OTHER_VARIABLES}
    documented |= {
        credential_env(system, user) for system, users in USERS.items() for user in users
    }
    assert names
    assert set(names) <= documented, (
        f"undocumented in .env.example: {sorted(set(names) - documented)}"
    )


def test_each_section_says_which_concerns_its_class_has() -> None:
    """The document shows a service has only what it uses: its concerns, named, and the others,
    named as absent."""
    text = DOC.read_text()
    concern_classes = [section.settings_class() for section in sections.CONCERNS]
    assert {cls.__name__ for cls in concern_classes} == {
        "ServiceSettings",
        "KafkaSettings",
        "MqttSettings",
        "InfluxSettings",
        "PrometheusSettings",
        "AlertmanagerSettings",
        "StackSettings",
    }
    for section in sections.SECTIONS:
        if section.concern:
            continue
        body = text.split(f"## {section.title}\n", 1)[1].split("\n## ", 1)[0]
        has_line = next(line for line in body.splitlines() if line.startswith("**Has:**"))
        has, _, lacks = has_line.partition("(not: ")
        for concern in sections.CONCERNS:
            inherits = issubclass(section.settings_class(), concern.settings_class())
            assert (concern.name in has) is inherits, (
                f"{section.title}: {concern.name} in {has_line!r}"
            )
            assert (concern.name in lacks) is (not inherits), (
                f"{section.title}: {concern.name} in {has_line!r}"
            )


def test_every_registered_service_has_its_section() -> None:
    """The reference documents the services the registry runs, with the registry's settings
    class."""
    from stacktools.harness.services import SERVICES

    by_service = {s.service: s for s in sections.SECTIONS if s.service}
    assert set(by_service) == set(SERVICES)
    assert all(by_service[name].settings is spec.settings for name, spec in SERVICES.items())
