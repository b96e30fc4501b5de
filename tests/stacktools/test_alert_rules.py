"""The alert rules (prometheus/alerts.yml): valid for Prometheus, each alert proven to fire and
to stay quiet by its unit tests, every metric it reads one a service declares, and every
runbook link an anchor of docs/operations.md.

promtool comes with Debian's prometheus package (scripts/setup.sh); without it the test
cannot run, which fails in CI rather than passing silently.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from streamkit.paths import REPO_ROOT, find_program
from tests.support.require import cannot_run
from tests.test_docs import anchors

RULES = REPO_ROOT / "prometheus" / "alerts.yml"
RULE_TESTS = REPO_ROOT / "prometheus" / "alerts.test.yml"
OPERATIONS = REPO_ROOT / "docs" / "operations.md"
#: Series Prometheus makes itself rather than scrapes.
PROMETHEUS_OWN = {"up"}
#: The modules that declare the services' metrics (importing one registers its metrics).
SERVICE_METRIC_MODULES = (
    "streamkit.health",
    "mqtt_bridge.bridge",
    "spark_jobs.listener",
    "spark_jobs.eos_sink",
    "spark_jobs.driver_state",
    "db_connector.connector",
    "db_connector.dead_letters",
)
PROMQL_WORDS = {"and", "or", "unless", "offset", "bool", "by", "without", "on", "ignoring"}


def promtool() -> Path:
    found = find_program("promtool")
    if found is None:
        cannot_run("promtool not found: run scripts/setup.sh (Debian package prometheus)")
    return found


def rules() -> list[dict]:
    return [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]


def test_promtool_checks_the_rules() -> None:
    result = subprocess.run(
        [promtool(), "check", "rules", RULES], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_pass() -> None:
    result = subprocess.run(
        [promtool(), "test", "rules", RULE_TESTS.name],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=RULE_TESTS.parent,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_unit_tests_that_see_it_fire_and_stay_quiet() -> None:
    cases = [
        case
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test.get("alert_rule_test", [])
    ]
    for rule in rules():
        mine = [case for case in cases if case["alertname"] == rule["alert"]]
        assert any(case["exp_alerts"] for case in mine), f"{rule['alert']}: no firing case"
        assert any(not case["exp_alerts"] for case in mine), f"{rule['alert']}: no quiet case"


def test_every_alert_is_labelled_annotated_and_has_a_runbook_entry() -> None:
    headings = anchors(OPERATIONS)
    for rule in rules():
        assert "for" in rule, f"{rule['alert']}: no `for:` (0s for an event said at once)"
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        notes = rule["annotations"]
        assert notes["summary"] and notes["description"], rule["alert"]
        page, _, anchor = notes["runbook"].partition("#")
        assert page == "docs/operations.md", rule["alert"]
        assert anchor == rule["alert"].lower(), rule["alert"]
        assert anchor in headings, f"{rule['alert']}: docs/operations.md has no heading {anchor}"


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: what is left after label matchers, ranges,
    strings and grouping clauses are taken out, that is neither a function nor a keyword."""
    text = re.sub(r'"[^"]*"', "", expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(\s*\()?", text):
        word, call = match.group(1), match.group(2)
        if call or word in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def declared_metrics() -> set[str]:
    """Every sample name the services' modules register with prometheus_client, as a scrape
    shows them (counters with ``_total``, histograms with ``_bucket``, ...)."""
    import importlib

    from prometheus_client import REGISTRY

    for module in SERVICE_METRIC_MODULES:
        importlib.import_module(module)
    from stacktools.stack.disk_space import DiskSpace  # registered by its program only

    return set(REGISTRY._names_to_collectors) | {family.name for family in DiskSpace({}).collect()}


def test_metric_names_are_parsed_from_expressions() -> None:
    assert metric_names(
        'sum by (job) (increase(a_total{x="y"}[5m])) > 0 unless on (job) b offset 5m'
    ) == {"a_total", "b"}


@pytest.mark.parametrize("rule", rules(), ids=lambda rule: rule["alert"])
def test_every_metric_of_a_rule_is_one_a_service_exports(rule: dict) -> None:
    unknown = metric_names(rule["expr"]) - declared_metrics() - PROMETHEUS_OWN
    assert not unknown, f"{rule['alert']} reads metrics no service declares: {sorted(unknown)}"
