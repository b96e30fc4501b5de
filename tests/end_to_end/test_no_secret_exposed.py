"""No secret where another user of the machine, a log reader or a scraper could see it.

A demo run from an empty run directory (the cheapest thing that starts every server, formats
Kafka's storage, writes Mosquitto's password file and starts every service of the pipeline) is
watched through /proc while it runs: no process's command line, which every local user can read,
may hold a generated password (the run directory's credentials.env) or one the test set itself.
Afterwards, with everything still up (``--keep-running``): no password in any file of the run
directory or of the demo's output (logs, summary) but those listed below that must hold one, in
no service's or server's /metrics text, and in no ``repr`` or ``str`` of a settings object.
"""

from __future__ import annotations

import dataclasses
import json
import re
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacktools.harness.services import SERVICES
from stacktools.stack import Stack
from stacktools.stack.settings import Settings
from streamkit.config import CREDENTIALS_FILE, ServiceSettings, read_env_file
from streamkit.paths import REPO_ROOT
from tests.end_to_end.test_first_run import SAMPLE, user_environment
from tests.support.cmdline_watch import CommandLineWatch, holding

pytestmark = [
    pytest.mark.stack,
    pytest.mark.spark,
]

#: Passwords the test sets itself (a user's own, from the environment): never generated, never
#: in credentials.env, and just as secret.
TEST_SET = ("KAFKA_ADMIN_PASSWORD", "MQTT_BRIDGE_PASSWORD", "INFLUX_CONNECTOR_PASSWORD")

#: The files that must hold passwords in clear text, relative to the run directory: the
#: generated credentials themselves, and Kafka's configuration (the admin's and the controller
#: listener's JAAS login lines, which Kafka reads only from there).
HOLD_PASSWORDS = (CREDENTIALS_FILE, "kafka/server.properties")


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


@dataclasses.dataclass
class KeptDemo:
    """The demo run from an empty run directory, everything left up, and what it showed."""

    env: dict[str, str]
    own: dict[str, str]
    settings: Settings
    run_dir: Path
    out: Path
    watch: CommandLineWatch


@pytest.fixture(scope="module")
def kept_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeptDemo]:
    tmp_path = tmp_path_factory.mktemp("kept-demo")
    run_dir, out = tmp_path / "run", tmp_path / "out"
    env = user_environment(run_dir)
    own = {name: f"test-set-{secrets.token_hex(12)}" for name in TEST_SET}
    env.update(own)
    with CommandLineWatch() as watch:
        demo = subprocess.run(
            [
                sys.executable,
                "-m",
                "stacktools.demo",
                "--events",
                str(SAMPLE),
                "--out",
                str(out),
                "--keep-running",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=1500,
        )
    settings = Settings.from_sources(environ=env)
    try:
        assert demo.returncode == 0, f"demo failed:\n{demo.stdout[-3000:]}\n{demo.stderr[-5000:]}"
        yield KeptDemo(env, own, settings, run_dir, out, watch)
    finally:
        Stack(settings).down()


def test_no_password_on_a_command_line_in_a_file_a_log_or_metrics(kept_demo: KeptDemo) -> None:
    env, own, settings, watch = kept_demo.env, kept_demo.own, kept_demo.settings, kept_demo.watch
    run_dir, out = kept_demo.run_dir, kept_demo.out
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
    for path in files_under(run_dir, out):
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


def test_the_pipeline_graph_shows_the_drained_demo(kept_demo: KeptDemo) -> None:
    """`stack status --pipeline` on the demo's stack, the services still up after the sample
    drained: every stage of the single pass up, the Spark sink's last batch committed (no
    transaction open), the connector with no lag, no dead letter; each figure as the services'
    own /metrics give it."""
    settings = kept_demo.settings
    wait_scraped(settings, {"mqtt_bridge", "spark_single_pass", "db_connector"})
    done = subprocess.run(
        [sys.executable, "-m", "stacktools.stack", "status", "--pipeline"],
        cwd=REPO_ROOT,
        env=kept_demo.env,
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
