"""The access table: the README shows it as it is, and it keeps each service to its own names."""

from __future__ import annotations

from stacktools.stack.access import (
    MQTT_RIGHTS,
    PREFIX_GRANTS,
    SPARK_JOB_USERS,
    TOPIC_RIGHTS,
    USERS,
    matrix_markdown,
)
from stacktools.stack.settings import Settings
from stacktools.stack.topics import load_topic_specs
from streamkit.paths import REPO_ROOT


def test_the_readme_shows_the_access_matrix_as_declared() -> None:
    text = (REPO_ROOT / "README.md").read_text()
    shown = text.split("<!-- access-matrix -->\n", 1)[1].split("\n<!-- /access-matrix -->", 1)[0]
    assert shown.splitlines() == matrix_markdown()


def test_every_declared_topic_has_a_role_with_rights() -> None:
    roles = {spec.name: spec.role for spec in load_topic_specs(Settings.from_sources({}))}
    assert all(roles.values()), f"topics without a role: {[n for n, r in roles.items() if not r]}"
    assert set(roles.values()) == set(TOPIC_RIGHTS)


def test_no_service_may_write_what_it_reads_from_another_stage_or_use_another_s_names() -> None:
    # the issue's own sentences, independent of the table's layout
    assert TOPIC_RIGHTS["raw"]["bridge"] == ("write",) and "connector" not in {
        user for user, rights in TOPIC_RIGHTS["raw"].items() if "write" in rights
    }
    assert not any(
        "bridge" in rights for role, rights in TOPIC_RIGHTS.items() if role not in ("raw", "dlq")
    )
    assert {user for rights in TOPIC_RIGHTS.values() for user in rights} <= set(USERS["kafka"]) - {
        "admin",
        "controller",
    }
    prefixes = [(g.resource, g.prefix) for g in PREFIX_GRANTS]
    for (kind, a), (other, b) in [(x, y) for x in prefixes for y in prefixes if x != y]:
        assert kind != other or not (a.startswith(b) or b.startswith(a)), f"{a} and {b} overlap"
    assert MQTT_RIGHTS["machine"][0] == "write" and MQTT_RIGHTS["bridge"][0] == "read"


def test_each_spark_job_uses_only_names_its_own_user_is_granted() -> None:
    """The transactional ids and consumer groups a job makes (streamkit.kafka_clients.owned_name)
    fall under its own user's grants and under no other user's."""
    from spark_jobs.config import AggregateSettings, JoinSettings, SinglePassSettings
    from streamkit.kafka_clients import owned_name

    jobs = {"spark-single-pass": SinglePassSettings, "spark-join": JoinSettings}
    jobs["spark-aggregate"] = AggregateSettings
    assert set(jobs) == set(SPARK_JOB_USERS)
    for user, cls in jobs.items():
        settings = cls()
        assert settings.kafka_username == user
        names = {
            "transactional_id": owned_name(settings, f"eos-{settings.query('q')}-p0"),
            "group": owned_name(settings, "spark-kafka-source") + "-uuid-driver-0",
        }
        for resource, name in names.items():
            holders = {
                g.user
                for g in PREFIX_GRANTS
                if g.resource == resource and name.startswith(g.prefix)
            }
            assert holders == {user}, (name, holders)
