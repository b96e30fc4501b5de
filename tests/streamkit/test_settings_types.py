"""Settings are typed and checked when they load: secrets never print, durations and sizes are
parsed once, a bad value stops a program with exit 2 naming its variable, and the contract's
data files ship inside the package."""

from __future__ import annotations

import ast
import dataclasses
import json
import logging
import pickle
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from mqtt_bridge.config import BridgeSettings
from spark_jobs.config import AggregateSettings, JoinSettings
from spark_jobs.passes import join_plan, parse_pairs
from stacktools.stack.settings import Settings
from streamkit.durations import format_duration, parse_duration, parse_duration_ms
from streamkit.errors import ConfigError, StackError
from streamkit.paths import REPO_ROOT
from streamkit.secret import Secret
from streamkit.sizes import format_size, parse_size
from streamkit.wire import resources

PASSWORD = "s3cret-value-never-printed"


# ----------------------------------------------------------------------------- secrets
def test_a_secret_never_prints_its_value() -> None:
    secret = Secret(PASSWORD)
    for shown in (repr(secret), str(secret), f"{secret}", f"{secret!r}", f"{secret:>10}"):
        assert PASSWORD not in shown
    assert secret.reveal() == PASSWORD
    assert secret == Secret(PASSWORD) and secret != PASSWORD  # never equal to plain text
    assert bool(secret) and not Secret("")
    assert pickle.loads(pickle.dumps(secret)).reveal() == PASSWORD  # Spark ships settings
    with pytest.raises(AttributeError):
        secret._value = "x"


def test_settings_hold_passwords_as_secrets_that_no_log_line_shows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    environ = {
        "STACK_RUN_DIR": str(tmp_path),
        "KAFKA_PASSWORD": PASSWORD,
        "MQTT_PASSWORD": PASSWORD,
        "INFLUX_PASSWORD": PASSWORD,
    }
    settings = Settings.from_sources(environ=environ)
    secrets = [
        f.name
        for f in dataclasses.fields(settings)
        if isinstance(getattr(settings, f.name), Secret)
    ]
    assert sorted(secrets) == ["influx_password", "kafka_password", "mqtt_password"]
    assert all(f.metadata["secret"] for f in dataclasses.fields(settings) if f.name in secrets)
    with caplog.at_level(logging.INFO):
        logging.getLogger("test").info("settings %s %r", settings, settings)
        logging.getLogger("test").info("redacted", extra={"settings": settings.redacted()})
    assert PASSWORD not in caplog.text
    assert PASSWORD not in repr(settings) and PASSWORD not in json.dumps(settings.redacted())
    assert PASSWORD not in str(settings.as_environment())
    assert settings.kafka_password.reveal() == PASSWORD
    # text becomes a Secret (tests and callers may pass text; the type says Secret, hence ignore)
    replaced = dataclasses.replace(settings, mqtt_password="other")  # type: ignore[arg-type]
    assert isinstance(replaced.mqtt_password, Secret)
    assert replaced.mqtt_password.reveal() == "other"


def test_every_password_field_is_a_secret() -> None:
    """No settings class anywhere declares a password as plain text."""
    from stacktools.config_reference.sections import all_settings_classes

    for cls in all_settings_classes():
        for field in dataclasses.fields(cls):
            if "password" in field.name or "token" in field.name:
                assert field.metadata.get("secret"), f"{cls.__name__}.{field.name}"
                assert isinstance(field.default, Secret), f"{cls.__name__}.{field.name}"


# ----------------------------------------------------------------------------- durations, sizes
def test_durations_are_parsed_when_the_settings_load(tmp_path: Path) -> None:
    environ = {"STACK_RUN_DIR": str(tmp_path)}
    bridge = BridgeSettings.from_sources(environ={**environ, "BRIDGE_MAX_FUTURE": "90s"})
    assert bridge.max_future == timedelta(seconds=90)
    aggregate = AggregateSettings.from_sources(
        environ={**environ, "AGGREGATE_ALLOWED_LATENESS": "off", "AGGREGATE_IDLE_TIMEOUT": "2m"}
    )
    assert (aggregate.allowed_lateness, aggregate.idle_timeout) == (
        timedelta(0),
        timedelta(minutes=2),
    )
    assert aggregate.window_rules().allowed_lateness_ms == 0
    assert aggregate.idle_flush() == timedelta(minutes=2)
    assert aggregate.as_environment()["AGGREGATE_IDLE_TIMEOUT"] == "2m"  # round trip to a child
    assert (
        AggregateSettings.from_sources(environ=aggregate.as_environment()).idle_timeout
        == aggregate.idle_timeout
    )


@pytest.mark.parametrize(
    ("settings_type", "variable", "value", "problem"),
    [
        (BridgeSettings, "BRIDGE_MAX_FUTURE", "1 hour", "not a duration"),
        (BridgeSettings, "BRIDGE_MAX_FUTURE", "0", "positive"),  # zero is not "off" here
        (BridgeSettings, "BRIDGE_MAX_PAYLOAD_BYTES", "1 MB please", "not a size"),
        (BridgeSettings, "KAFKA_PORT", "x", "not a valid int"),
        (BridgeSettings, "BRIDGE_MQTT5", "maybe", "not a boolean"),
        (AggregateSettings, "AGGREGATE_IDLE_TIMEOUT", "5 minutes", "not a duration"),
        (AggregateSettings, "AGGREGATE_SLIDING", "60s", "SIZE/SLIDE"),
        (AggregateSettings, "AGGREGATE_TUMBLING", "10 seconds", "not a duration"),
        (AggregateSettings, "SPARK_SINK", "executor", "not one of"),
        (Settings, "SPARK_WORKER_MEMORY", "lots", "not a size"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_its_variable(
    tmp_path: Path, settings_type: type[Settings], variable: str, value: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_type.from_sources(environ={"STACK_RUN_DIR": str(tmp_path), variable: value})
    assert refused.value.variable.startswith(variable) or variable in refused.value.variable
    assert str(refused.value).startswith(f"configuration error: {refused.value.variable}: ")
    assert problem in str(refused.value)
    assert isinstance(refused.value, StackError) and refused.value.exit_code == 2


def test_sizes_read_as_the_jvm_reads_them(tmp_path: Path) -> None:
    assert [parse_size(t) for t in ("65536", "64k", "64KiB", "1m", "2g", "2G")] == [
        65536,
        65536,
        65536,
        1 << 20,
        2 << 30,
        2 << 30,
    ]
    assert [format_size(n) for n in (2 << 30, 1 << 20, 65536, 1000)] == ["2g", "1m", "64k", "1000"]
    settings = Settings.from_sources(
        environ={"STACK_RUN_DIR": str(tmp_path), "SPARK_WORKER_MEMORY": "512m"}
    )
    assert settings.spark_worker_memory == 512 << 20
    assert settings.as_environment()["SPARK_WORKER_MEMORY"] == "512m"


def test_duration_text_round_trips() -> None:
    for text in ("250ms", "10s", "90s", "1m", "2h", "7d"):
        assert format_duration(parse_duration(text)) == text
    assert format_duration(parse_duration("off", allow_zero=True)) == "off"
    assert parse_duration_ms("1.5s") == 1500  # the windows' grammar, unchanged


@pytest.mark.parametrize(
    ("environ", "argv", "stall", "warning"),
    [
        ({"HEALTH_STALL": "90s"}, [], timedelta(seconds=90), ""),
        ({"HEALTH_STALL_S": "90"}, [], timedelta(seconds=90), "HEALTH_STALL_S is deprecated"),
        ({"HEALTH_STALL_S": "90", "HEALTH_STALL": "1m"}, [], timedelta(minutes=1), ""),
        ({"HEALTH_STALL": "90"}, [], timedelta(seconds=90), "HEALTH_STALL=90 is read in s"),
        ({"HEALTH_STALL_S": "1"}, ["--health-stall", "2m"], timedelta(minutes=2), ""),
        ({}, ["--health-stall", "0.5"], timedelta(milliseconds=500), "--health-stall 0.5 is read"),
        ({}, ["--health-stall-s", "90"], timedelta(seconds=90), "--health-stall-s is deprecated"),
    ],
)
def test_a_renamed_duration_reads_its_old_spelling_for_one_release_with_a_warning(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    environ: dict[str, str],
    argv: list[str],
    stall: timedelta,
    warning: str,
) -> None:
    """An old ``.env`` (or a variable renamed without its value) must not change what a
    service does, and the log must say how to write it now."""
    base = {"STACK_RUN_DIR": str(tmp_path)}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("os.environ", {**base, **environ})
        settings, _ = Settings.parse(argv)
    assert settings.health_stall == stall
    with caplog.at_level(logging.WARNING, logger="streamkit.config"):
        settings.log_legacy()
    messages = [record.getMessage() for record in caplog.records]
    if not warning:
        assert messages == []
        return
    assert len(messages) == 1 and warning in messages[0], messages
    assert getattr(caplog.records[0], "setting", None) == "HEALTH_STALL"
    new_spelling = f"--health-stall {format_duration(stall)}" if argv else "HEALTH_STALL=90s"
    assert messages[0].endswith(f"set {new_spelling}")


def test_a_service_logs_an_old_spelling_in_its_own_log_format(tmp_path: Path) -> None:
    """The warning is a line of the service's JSON log (a log collector sees it), not a bare
    line on stderr before logging is set up."""
    program = (
        "import sys; from streamkit.config import ServiceSettings; "
        "from streamkit.service import run_service; "
        "sys.exit(run_service('probe', ServiceSettings, None, [], lambda settings, flag: 0))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=REPO_ROOT,
        env={"STACK_RUN_DIR": str(tmp_path), "HEALTH_STALL_S": "90", "LOG_FORMAT": "json"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    warning = next(line for line in lines if line["level"] == "WARNING")
    assert warning["logger"] == "streamkit.config" and warning["setting"] == "HEALTH_STALL"
    assert warning["msg"].endswith("set HEALTH_STALL=90s")


def test_a_bare_number_of_a_renamed_duration_keeps_its_old_unit(tmp_path: Path) -> None:
    """JOIN_MAX_GAP_MS=5000 was 5000 ms, and so is JOIN_MAX_GAP=5000 for one release: the join
    sees the same gap either way."""
    for variable in ("JOIN_MAX_GAP_MS", "JOIN_MAX_GAP"):
        settings = JoinSettings.from_sources(
            environ={"STACK_RUN_DIR": str(tmp_path), variable: "5000"}
        )
        assert settings.max_gap == timedelta(seconds=5)
        assert join_plan(settings).config(()).max_gap_ms == 5000
    off = JoinSettings.from_sources(
        environ={"STACK_RUN_DIR": str(tmp_path), "JOIN_MAX_GAP_MS": "0"}
    )
    assert off.max_gap == timedelta(0) and join_plan(off).config(()).max_gap_ms is None


def test_join_pairs_are_a_config_error_naming_the_variable() -> None:
    for text, problem in (
        ("", "names no pair"),
        ("a", "left:right"),
        ("a:b:nope", "unknown"),
        ("a_*:b_**", "exactly one"),
        ("a_*:b", "exactly one"),
    ):
        with pytest.raises(ConfigError, match=f"JOIN_PAIRS: .*{problem}"):
            parse_pairs(text)
    for text, problem in (
        ("s_*:t_*,s_C1:x", "list it once"),
        ("s_*:t_*,s*:u_*", "ambiguous"),
    ):
        with pytest.raises(ConfigError, match=f"JOIN_PAIRS: .*{problem}"):
            join_plan(JoinSettings.from_sources(cli={"pairs": text}))
    assert JoinSettings.from_sources(environ={}).pairs  # the default is valid


def test_join_pairs_mix_explicit_pairs_and_patterns() -> None:
    pairs, patterns = parse_pairs("x:y:product, actSpeed_*:vaTorque_*")
    assert [(p.left, p.right, p.result_name) for p in pairs] == [("x", "y", "product")]
    assert [(p.left.text, p.right.text, p.result_name) for p in patterns] == [
        ("actSpeed_*", "vaTorque_*", "mechanical_power")
    ]


# ----------------------------------------------------------------------------- exit codes
def run_module(module: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), **env},
    )


def test_a_config_error_exits_2_with_one_line_naming_the_variable(tmp_path: Path) -> None:
    """Before any connection, log setup or /metrics: the settings fail to load."""
    run = run_module(
        "mqtt_bridge", env={"STACK_RUN_DIR": str(tmp_path), "BRIDGE_MAX_FUTURE": "1 hour"}
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [
        "python -m mqtt_bridge: configuration error: BRIDGE_MAX_FUTURE: not a duration: "
        "'1 hour' (e.g. 500ms, 10s, 1m, 2h)"
    ]
    run = run_module(
        "stacktools.stack.topics", env={"STACK_RUN_DIR": str(tmp_path), "KAFKA_PORT": "x"}
    )
    assert run.returncode == 2 and "configuration error: KAFKA_PORT: " in run.stderr, run.stderr
    assert "Traceback" not in run.stderr


def test_a_bad_option_exits_2_naming_the_option(tmp_path: Path) -> None:
    run = run_module("mqtt_bridge", "--max-future", "1x", env={"STACK_RUN_DIR": str(tmp_path)})
    assert run.returncode == 2
    assert "argument --max-future: not a duration: '1x'" in run.stderr, run.stderr


def test_no_system_exit_is_raised_below_a_program_s_start(tmp_path: Path) -> None:
    """Deep code raises typed errors; only a main (and argparse) may end the process."""
    allowed = {"tests", "benchmarks", ".stack", ".venv", "build"}
    found = []
    for path in REPO_ROOT.rglob("*.py"):
        if allowed & set(path.relative_to(REPO_ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and "SystemExit" in ast.unparse(node.exc or node):
                found.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert not found, found


def test_every_error_class_derives_from_the_root_and_is_defined_before_use() -> None:
    import importlib

    for module in (
        "streamkit.errors",
        "operators.errors",
        "db_connector.errors",
        "simulator.errors",
        "stacktools.stack.errors",
        "stacktools.dashboards.errors",
    ):
        classes = [
            value
            for value in vars(importlib.import_module(module)).values()
            if isinstance(value, type) and issubclass(value, BaseException)
        ]
        assert classes, module
        assert all(issubclass(cls, StackError) for cls in classes), module


# ----------------------------------------------------------------------------- package data
def test_schemas_and_topics_are_package_data() -> None:
    """Found through importlib.resources inside streamkit.wire, and declared as package data,
    so an installed copy (no source tree, no PYTHONPATH) has them."""
    for name in resources.SCHEMAS:
        schema = json.loads(resources.schema_file(name).read_text())
        assert schema["type"] == "record", name
    topics = yaml.safe_load(resources.topics_file().read_text())["topics"]
    assert "machinedata.raw" in topics
    package_dir = REPO_ROOT / "streamkit" / "wire"
    assert Path(str(resources.topics_file())).parent == package_dir
    import tomllib

    with (REPO_ROOT / "pyproject.toml").open("rb") as handle:
        package_data = tomllib.load(handle)["tool"]["setuptools"]["package-data"]["streamkit.wire"]
    assert {"schemas/*.avsc", "topics.yaml"} <= set(package_data)
    assert (
        not (REPO_ROOT / "schemas").exists() and not (REPO_ROOT / "kafka" / "topics.yaml").exists()
    )


def test_every_program_is_a_console_script() -> None:
    import tomllib

    from stacktools.config_reference.texts import PROGRAMS_RUN

    with (REPO_ROOT / "pyproject.toml").open("rb") as handle:
        scripts = tomllib.load(handle)["project"]["scripts"]
    assert set(scripts) == set(PROGRAMS_RUN)
    mains = {
        path.relative_to(REPO_ROOT).with_suffix("").as_posix().replace("/", ".")
        for path in REPO_ROOT.glob("*/**/*.py")
        if path.parts[len(REPO_ROOT.parts)] not in {"tests", "benchmarks", ".stack", ".venv"}
        and 'if __name__ == "__main__"' in path.read_text()
    }
    internal = {"spark_jobs.python_daemon"}  # Spark's worker daemon, never run by a user
    targets = {target.split(":")[0] for target in scripts.values()}
    packages = {m.removesuffix(".__main__") for m in mains}
    for module in packages - internal:
        assert (
            module in targets
            or f"{module}.cli" in targets
            or any(t.startswith(module + ".") for t in targets)
        ), module


MEASUREMENT = re.compile(
    r"~\s*\d|\d+(\.\d+)?\s*x\s+(slower|faster)|\d+\s*%\s*(less|more|faster|slower)"
    r"|measured (here|in|with)",
    re.IGNORECASE,
)


def test_help_says_what_an_option_does_never_a_measurement() -> None:
    """Figures belong in docs/performance.md; ``--help`` and docs/configuration.md say what an
    option does and when to change it."""
    from stacktools.config_reference.sections import all_settings_classes

    for cls in all_settings_classes():
        for field in dataclasses.fields(cls):
            assert not MEASUREMENT.search(field.metadata["help"]), f"{cls.__name__}.{field.name}"
    assert not MEASUREMENT.search((REPO_ROOT / "docs" / "configuration.md").read_text())


def test_help_shows_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    from mqtt_bridge.bridge import main

    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 1h; env BRIDGE_MAX_FUTURE)" in text
    assert "(default: 1m; env BRIDGE_MAX_PAYLOAD_BYTES)" in text
    assert "(no default: generated by the stack launcher; env KAFKA_PASSWORD)" in text
    options = re.findall(r"(?<=\s)--[a-z0-9-]+ [A-Z_]+", text)
    assert options and text.count("(default: ") + text.count("(no default") >= len(options)
