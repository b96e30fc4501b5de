"""Topic provisioning from the declared topics (streamkit/wire/topics.yaml, package data):
create what is missing, report drift.

Idempotent by design: running it against a provisioned broker changes nothing and says so.
Drift (a different partition count or config value than declared) is reported, and only
config drift can be fixed on request (``--fix-config``); partition counts are never changed
automatically because that would move keys to other partitions and break per-thing order.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from importlib.resources.abc import Traversable
from pathlib import Path

import yaml
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from stacktools.stack.kafka_access import answers, grant_topics
from stacktools.stack.settings import Settings, StackSettings
from streamkit.cli import HelpFormatter, entry_point, program_name
from streamkit.durations import duration_ms
from streamkit.kafka_clients import admin_client
from streamkit.logs import setup_logging
from streamkit.wire.resources import topics_file

log = logging.getLogger("stacktools.stack.topics")


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str]
    #: -1: the broker's default.replication.factor (the launcher's: min(nodes, 3))
    replication_factor: int = -1
    doc: str = ""
    role: str = (
        ""  # raw, dlq, joined, ...: which services may read or write it (stacktools.stack.access)
    )


@dataclass
class ProvisionReport:
    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    drift: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)


def retention_config(retention: timedelta) -> dict[str, str]:
    """A compacted topic's deletion by age: ``compact,delete`` keeping each record
    ``retention`` after it was written (its CreateTime, the producer's clock); zero: compacted
    alone, nothing deleted while its key lives."""
    if not retention:
        return {"cleanup.policy": "compact"}
    return {"cleanup.policy": "compact,delete", "retention.ms": str(duration_ms(retention))}


def load_topic_specs(
    settings: StackSettings, path: Path | Traversable | None = None
) -> list[TopicSpec]:
    """The declared topics: the package's own, or ``path`` (a test's or a user's variant), with
    the partition count and retention the settings give (``retention_setting``: the name of
    the setting a compacted topic's retention comes from)."""
    declared = yaml.safe_load((path or topics_file()).read_text())["topics"]
    specs = []
    for name, body in declared.items():
        config = {str(k): str(v) for k, v in (body.get("config") or {}).items()}
        if "retention_setting" in body:
            config |= retention_config(getattr(settings, body["retention_setting"]))
        specs.append(
            TopicSpec(
                name,
                int(body.get("partitions") or settings.topic_partitions),
                config,
                int(body.get("replication_factor", -1)),
                body.get("doc", ""),
                body.get("role", ""),
            )
        )
    return specs


def _describe_configs(admin: AdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, n) for n in names])
    configs = answers(futures.values(), 30.0, "describing the topics' configs")
    return {
        resource.name: {k: v.value for k, v in config.items()}
        for resource, config in zip(futures, configs, strict=True)
    }


def provision(
    settings: Settings, specs: list[TopicSpec], *, fix_config: bool = False, timeout_s: float = 30.0
) -> ProvisionReport:
    admin = admin_client(settings)
    report = ProvisionReport()
    existing = admin.list_topics(timeout=timeout_s).topics
    grant_topics(admin, [(s.name, s.role) for s in specs if s.role], timeout_s)
    missing = [s for s in specs if s.name not in existing]
    if missing:
        futures = admin.create_topics(
            [
                NewTopic(
                    s.name,
                    num_partitions=s.partitions,
                    replication_factor=s.replication_factor,
                    config=s.config,
                )
                for s in missing
            ],
            operation_timeout=timeout_s,
        )
        for name, future in futures.items():
            try:
                answers(
                    [future],
                    timeout_s,
                    f"creating topic {name}; with KAFKA_BROKERS > 1, is a node down? (the admin "
                    "client may have sent the request to it: docs/operations.md, 'Three Kafka "
                    "nodes')",
                )
                report.created.append(name)
            except KafkaException as exc:  # created concurrently by someone else: check it below
                if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise
    present = [s for s in specs if s.name not in report.created]
    if not present:
        return report
    metadata = admin.list_topics(timeout=timeout_s).topics
    actual_configs = _describe_configs(admin, [s.name for s in present])
    for spec in present:
        problems = []
        partitions = len(metadata[spec.name].partitions)
        if partitions != spec.partitions:
            problems.append(
                f"{spec.name}: partitions declared {spec.partitions}, actual {partitions} (not "
                "changed automatically)"
            )
        config_drift = {
            k: v for k, v in spec.config.items() if actual_configs[spec.name].get(k) != v
        }
        for key, value in config_drift.items():
            problems.append(
                f"{spec.name}: {key} declared {value!r}, actual "
                f"{actual_configs[spec.name].get(key)!r}"
            )
        if config_drift and fix_config:
            resource = ConfigResource(
                ResourceType.TOPIC,
                spec.name,
                incremental_configs=[
                    ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                    for k, v in config_drift.items()
                ],
            )
            answers(
                admin.incremental_alter_configs([resource]).values(),
                timeout_s,
                f"changing {spec.name}'s config",
            )
            report.fixed.extend(f"{spec.name}: {k}={v}" for k, v in config_drift.items())
            problems = [p for p in problems if "partitions" in p]
        (report.drift.extend(problems) if problems else report.unchanged.append(spec.name))
    return report


@entry_point("stacktools.stack.topics")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program_name("stacktools.stack.topics"),
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--file",
        type=Path,
        default=None,
        help="topic declarations to provision instead of the stack's own (default: "
        "streamkit/wire/topics.yaml, shipped in the package); for a variant of your own",
    )
    parser.add_argument(
        "--fix-config", action="store_true", help="set drifted topic configs to the declared values"
    )
    parser.add_argument("--check", action="store_true", help="exit 3 when any drift remains")
    settings, args = Settings.parse(argv, parser=parser)
    setup_logging(settings.log_level, service="topics", fmt=settings.log_format)
    report = provision(settings, load_topic_specs(settings, args.file), fix_config=args.fix_config)
    for name in report.created:
        print(f"created   {name}")
    for name in report.unchanged:
        print(f"ok        {name}")
    for line in report.fixed:
        print(f"fixed     {line}")
    for line in report.drift:
        print(f"DRIFT     {line}")
    return 3 if (args.check and report.drift) else 0


if __name__ == "__main__":
    sys.exit(main())
