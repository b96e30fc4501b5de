"""A new user's first run: the README's main command, typed as the README spells it, from an
empty run directory (no credentials, no data) on ports of its own; then a second run in the same
run directory against a stack that is already up, left running (``--keep-running``). The summary
is checked against what the data says, not against what the services report about themselves.

The same two runs show that no secret is where another user of the machine, a log reader or a
scraper could see it. The first run is the cheapest thing that starts every server, formats
Kafka's storage, writes Mosquitto's password file and starts every service of the pipeline; both
are watched through /proc while they run: no process's command line, which every local user can
read, may hold a generated password (the run directory's credentials.env) or one the user set
(three of their own, from the environment). Afterwards, with everything still up: no password in
any file of the run directory or of the demo's output (logs, summary) but those listed below that
must hold one, in no service's or server's /metrics text, and in no ``repr`` or ``str`` of a
settings object; and ``stack status --pipeline`` shows the drained second run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_jobs.config import JoinSettings
from stacktools.config_reference.render import env_of
from stacktools.config_reference.sections import SECTIONS
from stacktools.harness.services import SERVICES
from stacktools.stack import Stack
from stacktools.stack.settings import Settings
from streamkit.config import CREDENTIALS_FILE, ServiceSettings, read_env_file
from streamkit.paths import REPO_ROOT
from tests.oracles.join import parse_pairs
from tests.oracles.pipeline import PipelineSpec, default_stats, distinct_records, join_pairs
from tests.oracles.rows import event_time_order, file_rows, measurements
from tests.oracles.windows import Spec
from tests.support.cmdline_watch import CommandLineWatch, holding
from tests.support.exactness import assert_pipeline_exact
from tests.support.ports import free_ports

pytestmark = [pytest.mark.stack, pytest.mark.spark]
SAMPLE = Path("tests/data/test_events.json")  # as the README spells it: relative to the clone
#: The demo's pipeline with a user's defaults (spark_jobs.config): the join, tumbling 10 s windows.
DEMO_PIPELINE = PipelineSpec(
    pairs=tuple(parse_pairs("actSpeed_*:vaTorque_*:mechanical_power")),
    windows=(Spec("tumbling", 10_000, 10_000),),
    lateness_ms=10_000,
    stats=default_stats(),
)
PLOTS = (
    "throughput.png",
    "latency.png",
    "joined_power.png",
    "window_aggregates.png",
    "operation_statistics.png",
)
#: Passwords the user sets (their own, from the environment): never generated, never in
#: credentials.env, and just as secret.
USER_SET = ("KAFKA_ADMIN_PASSWORD", "MQTT_BRIDGE_PASSWORD", "INFLUX_CONNECTOR_PASSWORD")
#: The files that must hold passwords in clear text, relative to the run directory: the
#: generated credentials themselves, and Kafka's configuration (the admin's and the controller
#: listener's JAAS login lines, which Kafka reads only from there).
HOLD_PASSWORDS = (CREDENTIALS_FILE, "kafka/server.properties")


def user_environment(run_dir: Path) -> dict[str, str]:
    """This machine's environment without any of the project's settings (a user has none),
    plus an empty run directory and ports no other stack uses."""
    ours = {
        env_of(field)
        for section in SECTIONS
        for field in dataclasses.fields(section.settings_class())
    }
    ours.add("STACK_ALLOW_EXTERNAL")
    env = {k: v for k, v in os.environ.items() if k not in ours}
    kafka, controller, mqtt, influx, prometheus, alertmanager = free_ports(6)
    env.update(
        STACK_RUN_DIR=str(run_dir),
        KAFKA_PORT=str(kafka),
        KAFKA_CONTROLLER_PORT=str(controller),
        MQTT_PORT=str(mqtt),
        INFLUX_PORT=str(influx),
        PROMETHEUS_PORT=str(prometheus),
        ALERTMANAGER_PORT=str(alertmanager),
    )
    return env


def run_as_user(env: dict[str, str], command: list[str], timeout_s: float) -> str:
    """A command as the user types it in the checkout; its output, once it succeeded."""
    done = subprocess.run(
        command,
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert done.returncode == 0, (
        f"{command[0]} failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    )
    return done.stdout


def run_demo(env: dict[str, str], out: Path, *options: str) -> str:
    return run_as_user(
        env, ["scripts/demo.sh", "--events", str(SAMPLE), "--out", str(out), *options], 1500
    )


def expected_pairs(env: dict[str, str]) -> int:
    """The join library's pairs for the sample in replay order, as an unfinished stream."""
    settings = JoinSettings.from_sources(environ=env)
    pairs, late = join_pairs(
        settings, distinct_records(event_time_order(file_rows(REPO_ROOT / SAMPLE)))
    )
    assert late == 0  # the replay is in event-time order
    return sum(pairs.values())


def check_summary(out: Path, pairs: int) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    points = summary["influxdb_points"]
    assert summary["rows_in_file"] == summary["rows_published"] == 5_000, summary
    assert summary["raw_records"] == points["raw"] == 19_825, summary
    assert points["joined"] == pairs, summary
    assert points["aggregate"] > 0, summary
    assert summary["dead_lettered_by_bridge"] == points["dead_letter"] == 0, summary
    # the operation statistics of the sample's one drive, as printed and drawn
    cycles = summary["operation_statistics"]["per_component"]["C11"]
    assert cycles["cycles"] == points["opstats"] > 100, summary
    assert sum(cycles["band_hours"].values()) > 1 and cycles["energy_kwh"] > 0, summary
    assert summary["overload_alerts"]["firing"] == 0, summary  # 2 % of the default rating
    for name in PLOTS:
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000, name
    return summary


def check_status_lines(stdout: str) -> None:
    """What the user watches: the simulator's rows show as soon as the bridge has records of them
    (a replay of 5,000 rows takes about a second, less than the sampling interval)."""
    lines = re.findall(r"simulator rows ([\d,]+) \| bridge records ([\d,]+)", stdout)
    assert lines, stdout
    for simulator, bridge in lines:
        assert int(bridge.replace(",", "")) == 0 or int(simulator.replace(",", "")) > 0, lines


@dataclasses.dataclass
class UserRuns:
    """The two runs in one run directory, the stack and the second run's services left up."""

    env: dict[str, str]
    own: dict[str, str]
    settings: Settings
    run_dir: Path
    outs: tuple[Path, Path]
    stdout: tuple[str, str]
    #: each server's state after the first run, and each one's pid before the second
    after_first: dict[str, str]
    pids: dict[str, int | None]
    watch: CommandLineWatch


@pytest.fixture(scope="module")
def user_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UserRuns]:
    tmp_path = tmp_path_factory.mktemp("first-run")
    run_dir, outs = tmp_path / "run", (tmp_path / "first", tmp_path / "second")
    env = user_environment(run_dir)
    own = {name: f"user-set-{secrets.token_hex(12)}" for name in USER_SET}
    env.update(own)
    stack: Stack | None = None
    try:
        with CommandLineWatch() as watch:
            first = run_demo(env, outs[0])
            # read after the first run: its credentials are the run directory's from now on
            settings = Settings.from_sources(environ=env)
            stack = Stack(settings)
            after_first = {s.name: s.state for s in stack.status()}
            # the user brings the stack up and runs the demo again in the same run directory
            run_as_user(env, [sys.executable, "-m", "stacktools.stack", "up"], 600)
            pids = {s.name: s.pid for s in stack.status()}
            second = run_demo(env, outs[1], "--keep-running")
        yield UserRuns(env, own, settings, run_dir, outs, (first, second), after_first, pids, watch)
    finally:
        (stack or Stack(Settings.from_sources(environ=env))).down()


def test_first_run_from_an_empty_run_dir_then_again_on_the_running_stack(
    user_runs: UserRuns,
) -> None:
    env, settings, run_dir = user_runs.env, user_runs.settings, user_runs.run_dir
    pairs = expected_pairs(env)
    assert pairs > 1000

    summary = check_summary(user_runs.outs[0], pairs)
    check_status_lines(user_runs.stdout[0])
    assert "p99" in user_runs.stdout[0]
    assert (run_dir / "credentials.env").stat().st_mode & 0o077 == 0
    assert set(user_runs.after_first.values()) == {"stopped"}, (
        "the demo must stop the stack it started"
    )

    again = check_summary(user_runs.outs[1], pairs)
    assert again["raw_topic"] != summary["raw_topic"] and again["database"] != summary["database"]
    after = Stack(settings).status()  # the servers, and the services the second run left up
    assert {s.name: s.pid for s in after if s.name in user_runs.pids} == user_runs.pids and all(
        s.state == "running" for s in after
    ), "the second run must reuse the running stack and leave it running"
    # What the second run left in Kafka and InfluxDB, by value against the oracles.
    topics = {kind: again["topics"][kind] for kind in ("raw", "joined", "aggregates", "late")}
    print(
        assert_pipeline_exact(
            settings,
            topics,
            again["database"],
            DEMO_PIPELINE,
            measurements(event_time_order(file_rows(REPO_ROOT / SAMPLE))),
            timeout_s=60,
        )
    )


def files_under(*roots: Path) -> Iterator[Path]:
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                yield path


def scrape_urls(settings: Settings) -> list[str]:
    """Every /metrics Prometheus scrapes and finds up (the services, whichever ports the demo
    gave them, and Prometheus itself)."""
    api = f"http://127.0.0.1:{settings.prometheus_port}/api/v1/targets?state=active"
    with urllib.request.urlopen(api, timeout=10) as response:
        targets = json.load(response)["data"]["activeTargets"]
    return sorted({t["scrapeUrl"] for t in targets if t["health"] == "up"})


def wait_scraped(settings: Settings, jobs: set[str], timeout_s: float = 60) -> list[str]:
    """The scrape URLs once every one of ``jobs`` (by service label) is up."""
    deadline = time.monotonic() + timeout_s
    while True:
        api = f"http://127.0.0.1:{settings.prometheus_port}/api/v1/targets?state=active"
        with urllib.request.urlopen(api, timeout=10) as response:
            targets = json.load(response)["data"]["activeTargets"]
        up = {t["labels"].get("service") for t in targets if t["health"] == "up"}
        if jobs <= up or time.monotonic() > deadline:
            return scrape_urls(settings)
        time.sleep(2)


def test_no_password_on_a_command_line_in_a_file_a_log_or_metrics(user_runs: UserRuns) -> None:
    env, own, settings, watch = user_runs.env, user_runs.own, user_runs.settings, user_runs.watch
    run_dir = user_runs.run_dir
    findings: list[str] = []
    generated = read_env_file(settings.credentials_path)
    passwords = {**generated, **own}
    assert len(generated) >= 10 and all(len(v) >= 12 for v in passwords.values()), generated
    assert not set(own) & set(generated), "a password the test set was generated anyway"
    # every process still up, once more (the services the demo left running among them)
    watch.look_once_more()
    findings += watch.leaks(passwords)

    # files: server configuration, data, logs; the demo's service logs and summary
    allowed = {run_dir / name for name in HOLD_PASSWORDS}
    assert all(path.is_file() for path in allowed), "a listed file no longer exists"
    for path in files_under(run_dir, *user_runs.outs):
        leaked = holding(path.read_bytes(), passwords)
        if leaked and path not in allowed:
            findings.append(f"file {path} holds {leaked}")

    # every /metrics Prometheus scrapes: the pipeline's services and Prometheus itself
    urls = wait_scraped(settings, {"mqtt_bridge", "spark_single_pass", "db_connector"})
    assert len(urls) >= 4, urls
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as response:
            leaked = holding(response.read(), passwords)
        if leaked:
            findings.append(f"{url} holds {leaked}")

    # settings objects as logs, tracebacks and debuggers show them
    classes: list[type[ServiceSettings]] = [Settings]
    classes += [spec.settings for spec in SERVICES.values()]
    for cls in classes:
        loaded = cls.from_sources(environ=env)
        texts = [repr(loaded), str(loaded), json.dumps(loaded.redacted())]
        texts += [json.dumps(loaded.as_environment())]
        texts += [repr(getattr(loaded, f.name)) for f in dataclasses.fields(loaded)]
        leaked = holding("\n".join(texts).encode(), passwords)
        if leaked:
            findings.append(f"{cls.__name__}'s repr, str or redacted() holds {leaked}")
    assert findings == [], "\n".join(findings)


def test_the_pipeline_graph_shows_the_drained_demo(user_runs: UserRuns) -> None:
    """`stack status --pipeline` on the second run's stack, the services still up after the sample
    drained: every stage of the single pass up, the Spark sink's last batch committed (no
    transaction open), the connector with no lag, no dead letter; each figure as the services'
    own /metrics give it."""
    settings = user_runs.settings
    wait_scraped(settings, {"mqtt_bridge", "spark_single_pass", "db_connector"})
    done = subprocess.run(
        [sys.executable, "-m", "stacktools.stack", "status", "--pipeline"],
        cwd=REPO_ROOT,
        env=user_runs.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    for stage in ("mqtt_bridge", "spark_single_pass", "db_connector"):
        assert lines[stage].split()[1] == "up", done.stdout
        assert "dead letters 0" in lines[stage], done.stdout
    spark = re.search(
        r"batch (\d+)  committed (\d+)  open transaction (none|[\d.]+ s)",
        lines["spark_single_pass"],
    )
    assert spark, done.stdout
    # data batches committed (the first batch holds the whole sample when Spark's first
    # batch starts after the replay); the batches after them may be empty (they commit
    # nothing), and one of those may be between its begin and its abort right now
    assert int(spark.group(1)) >= int(spark.group(2)) >= 0, done.stdout
    assert spark.group(3) == "none" or float(spark.group(3)[:-2]) < 10, done.stdout
    assert "lag 0  pending 0" in lines["db_connector"], done.stdout
    assert "spark_join" not in lines and "simulator" in lines, done.stdout
    assert "alerts: 0 firing" in done.stdout, done.stdout
