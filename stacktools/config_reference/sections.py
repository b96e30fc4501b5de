"""The sections of the configuration reference: one per concern (a group of fields several
settings classes share) and one per service or tool, each with its settings class and its
introduction, in the order the page lists them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from spark_jobs.config import IdleSettings, SparkJobSettings, StatisticsSettings, WindowSettings
from stacktools.dashboards.settings import DashboardSettings
from stacktools.harness.services import SERVICES
from stacktools.stack.disk_space import DiskSpaceSettings
from stacktools.stack.settings import Settings, StackSettings
from stacktools.verify.cli import VerifySettings
from streamkit.config import (
    AlertmanagerSettings,
    InfluxSettings,
    KafkaSettings,
    MqttSettings,
    PrometheusSettings,
    ServiceSettings,
)


@dataclass(frozen=True)
class Section:
    """One concern (a group of fields several classes share) or one service of the reference."""

    title: str
    settings: type[ServiceSettings]
    intro: str
    service: str | None = None  #: name in the service registry (stacktools.harness.services)
    concern: bool = False  #: a mixin of streamkit.config that services compose
    short: str = ""  #: how other sections name it ("Kafka"); default the title up to " ("

    @classmethod
    def of_service(cls, name: str, intro: str) -> Section:
        """A service's section, named and typed by the service registry."""
        spec = SERVICES[name]
        return cls(f"{spec.title} (`python -m {spec.module}`)", spec.settings, intro, service=name)

    def settings_class(self) -> type[ServiceSettings]:
        return self.settings

    def parents(self) -> list[Section]:
        """The other sections whose class this one's derives from: their fields are documented
        there."""
        cls = self.settings_class()
        return [s for s in SECTIONS if s is not self and issubclass(cls, s.settings_class())]

    def own_fields(self) -> list[dataclasses.Field]:
        inherited = {
            f.name for parent in self.parents() for f in dataclasses.fields(parent.settings_class())
        }
        return [f for f in dataclasses.fields(self.settings_class()) if f.name not in inherited]

    def concerns(self) -> tuple[list[Section], list[Section], list[Section]]:
        """(the concerns this class has, the concerns it has not, the other sections whose fields it
        inherits, such as the Spark jobs' common ones)."""
        parents = self.parents()
        has = [s for s in CONCERNS if s in parents]
        return (
            has,
            [s for s in CONCERNS if s not in has],
            [s for s in parents if not s.concern and s.own_fields()],
        )

    @property
    def name(self) -> str:
        return self.short or self.title.split(" (")[0]


SECTIONS: tuple[Section, ...] = (
    Section(
        "Every service (`ServiceSettings`)",
        ServiceSettings,
        "`streamkit.config.ServiceSettings`: every service and tool accepts these. Each service "
        "has its own default `METRICS_PORT`, given in its section; 0 means any free port.",
        concern=True,
        short="service base",
    ),
    Section(
        "Kafka (`KafkaSettings`)",
        KafkaSettings,
        "`streamkit.config.KafkaSettings`: the broker, the login and the pipeline's topic names, "
        "for the services that read or write Kafka.",
        concern=True,
    ),
    Section(
        "MQTT (`MqttSettings`)",
        MqttSettings,
        "`streamkit.config.MqttSettings`: the broker, the login and the topic prefix, for the "
        "services that publish or subscribe.",
        concern=True,
    ),
    Section(
        "InfluxDB (`InfluxSettings`)",
        InfluxSettings,
        "`streamkit.config.InfluxSettings`: the server, the login and the database, for the "
        "services that write or query InfluxDB.",
        concern=True,
    ),
    Section(
        "Prometheus (`PrometheusSettings`)",
        PrometheusSettings,
        "`streamkit.config.PrometheusSettings`: the local Prometheus, which the stack launcher "
        "runs and the dashboards' checker and the pipeline view query.",
        concern=True,
    ),
    Section(
        "Alertmanager (`AlertmanagerSettings`)",
        AlertmanagerSettings,
        "`streamkit.config.AlertmanagerSettings`: the local Alertmanager, which the stack "
        "launcher runs and the alert forwarder posts to.",
        concern=True,
    ),
    Section(
        "Stack launcher only (`StackSettings`)",
        StackSettings,
        "`stacktools.stack.settings.StackSettings`: servers no service talks to and how topics are "
        "provisioned; read by the stack launcher and its tools only.",
        concern=True,
        short="stack launcher",
    ),
    Section(
        "Stack launcher, tools and tests (`Settings`)",
        Settings,
        "`stacktools.stack.settings.Settings`, the full model: the stack launcher (`python -m "
        "stacktools.stack`), `python -m stacktools.stack.topics`, the demo, the benchmarks and the "
        "tests talk to every server. It passes its values to the services it starts as environment "
        "variables; each service reads those of its own concerns and ignores the rest.",
    ),
    Section.of_service(
        "simulator",
        "Replays an events.json file over MQTT (QoS 1) to `<MQTT_TOPIC_PREFIX>/<Thing>`.",
    ),
    Section.of_service(
        "mqtt_bridge",
        "MQTT (persistent session, QoS 1) -> `RAW_TOPIC` (idempotent producer, acks=all); invalid "
        "payloads -> `DLQ_TOPIC`. One bridge per `BRIDGE_CLIENT_ID`: the id names its MQTT "
        "session.",
    ),
    Section(
        "Spark jobs, common to all (`spark_jobs.join`, `spark_jobs.aggregate`, "
        "`spark_jobs.single_pass`)",
        SparkJobSettings,
        "`spark_jobs.config.SparkJobSettings`: every Spark job accepts these. The query name names "
        "the checkpoint, the `transactional.id` (`<Kafka user>.eos-<query>`) and the commit-marker "
        "key, so two jobs (or two instances of one job) must never share it. Each job logs in to "
        "Kafka as a user of its own (`spark-single-pass`, `spark-join`, `spark-aggregate`), whose "
        "transactional ids and consumer groups begin with its name and a dot.",
        short="Spark jobs' common",
    ),
    Section(
        "Idle timeout and state bounds (`spark_jobs.join`, `spark_jobs.aggregate`, "
        "`spark_jobs.single_pass`)",
        IdleSettings,
        "`spark_jobs.config.IdleSettings`: after this much processing time without a record of a "
        "key, its open windows and the join's pending pairs are emitted anyway, the one output "
        "that depends on the wall clock (`docs/windows.md`, `docs/join.md`); how long a silent "
        "thing's state is kept, and how many quantity names a thing may have "
        "(`docs/operators.md`).",
        short="idle timeout and state bounds",
    ),
    Section(
        "Operation statistics (`spark_jobs.join`, `spark_jobs.single_pass`)",
        StatisticsSettings,
        "`spark_jobs.config.StatisticsSettings`: the operation statistics per component (load "
        "spectrum, duty cycle, energy, overload alerts), computed beside the join in either shape "
        "(`docs/operation-statistics.md`).",
        short="operation statistics",
    ),
    Section.of_service(
        "spark_join",
        "LocalStreamBuffer join per Thing, the operation statistics beside it: `RAW_TOPIC` -> "
        "`JOINED_TOPIC` + `OPSTATS_TOPIC` + `OVERLOADS_TOPIC` + `LATE_TOPIC` (default query name "
        "`lsb-join`).",
    ),
    Section(
        "Window rules (`spark_jobs.aggregate`, `spark_jobs.single_pass`)",
        WindowSettings,
        "`spark_jobs.config.WindowSettings`: the windows and their lateness, idle and future rules "
        "(`docs/windows.md`), for the jobs that aggregate.",
        short="window rules",
    ),
    Section.of_service(
        "spark_aggregate",
        "Event-time windows per (thing, quantity): `RAW_TOPIC` (or `JOINED_TOPIC` with `--source "
        "joined`) -> `AGGREGATES_TOPIC` + `LATE_TOPIC` (default query name `aggregate`, or "
        "`aggregate-joined`). A second instance for `--source joined` needs its own `METRICS_PORT` "
        "on the same host.",
    ),
    Section.of_service(
        "spark_single_pass",
        "The join, the operation statistics and the windows in one stateful pass per Thing: "
        "`RAW_TOPIC` -> `JOINED_TOPIC` + `OPSTATS_TOPIC` + `OVERLOADS_TOPIC` + "
        "`AGGREGATES_TOPIC` + `LATE_TOPIC`, one transaction per batch (default query name "
        "`single-pass`); writes what `spark_jobs.join` and `spark_jobs.aggregate` write together.",
    ),
    Section.of_service(
        "db_connector",
        "Committed Kafka records -> InfluxDB points. Several instances share the work with the "
        "same `CONNECTOR_GROUP_ID` and distinct `CONNECTOR_INSTANCE_ID`s.",
    ),
    Section.of_service(
        "alert_forwarder",
        "The components' overload alerts: `OVERLOADS_TOPIC` (read whole at each start, "
        "committed records only) -> Alertmanager's API, each firing alert posted again every "
        "`ALERTS_RESEND`, each resolve once (`docs/operation-statistics.md`).",
    ),
    Section(
        "Disk space reporter (`python -m stacktools.stack.disk_space`)",
        DiskSpaceSettings,
        "Serves the free space of the filesystems holding the given data directories on "
        "/metrics, for the disk alert. The stack launcher runs it (component `disk-space`) for "
        "its Kafka and InfluxDB data directories, on any free port it hands Prometheus as a file "
        "target.",
    ),
    Section(
        "Verify (`python -m stacktools.verify`)",
        VerifySettings,
        "Recomputes from an events file what InfluxDB (or, with `--topics`, the Kafka topics) "
        "must hold and compares. Its rules are the jobs' own options (`--pairs`, `--tumbling`, "
        "...), listed by `python -m stacktools.verify --help`.",
    ),
    Section(
        "Dashboards checker (`python -m stacktools.dashboards`)",
        DashboardSettings,
        "Runs every panel's query against the real InfluxDB and Prometheus, as Grafana's read-only "
        "user. Its action (`validate`, `list`, `check`) and the check's time range, variables and "
        "output are tool flags, listed by `python -m stacktools.dashboards --help`.",
    ),
)


#: The mixins of streamkit.config, in the order the document lists them.
CONCERNS: tuple[Section, ...] = tuple(section for section in SECTIONS if section.concern)


def all_settings_classes() -> list[type[ServiceSettings]]:
    return [section.settings_class() for section in SECTIONS]
