"""The one list of the pipeline's services: how each is started, where it serves /metrics,
what it logs once ready, which settings class configures it, and which of its options a
:class:`~stacktools.harness.wiring.Wiring` sets. The pipeline, the demo, the launcher's Prometheus,
the configuration reference and the tests all read it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from alert_forwarder.config import ForwarderSettings
from db_connector.config import ConnectorSettings
from mqtt_bridge.config import BridgeSettings
from simulator.config import SimulatorSettings
from spark_jobs.config import AggregateSettings, JoinSettings, SinglePassSettings
from stacktools.harness.processes import ServiceProcess
from stacktools.harness.wiring import Wiring
from stacktools.stack.process import free_port
from streamkit.config import ServiceSettings


@dataclasses.dataclass(frozen=True)
class ServiceSpec:
    name: str  #: metrics, log and Prometheus job name
    title: str  #: what people call it
    module: str  #: ``python -m <module>``
    settings: type[ServiceSettings]
    ready_line: str  #: logged once it takes input ('' for the simulator, which is the input)
    wiring_args: Callable[
        [Wiring, Path], list[str]
    ]  #: its options for a wiring and a work directory

    @property
    def metrics_port(self) -> int:
        """Its default /metrics port (the local Prometheus scrapes exactly these)."""
        port = {f.name: f.default for f in dataclasses.fields(self.settings)}["metrics_port"]
        assert isinstance(port, int), f"{self.module}: metrics_port has no default"
        return port

    def args(self, wiring: Wiring, work_dir: Path) -> list[str]:
        return self.wiring_args(wiring, work_dir)


def _spark_args(w: Wiring) -> list[str]:
    return ["--raw-topic", w.raw, "--late-topic", w.late, "--marker-topic", w.markers]


SERVICES: dict[str, ServiceSpec] = {
    spec.name: spec
    for spec in (
        ServiceSpec(
            "simulator",
            "Simulator",
            "simulator",
            SimulatorSettings,
            "",
            lambda w, _: ["--mqtt-topic-prefix", w.prefix, "--no-progress"],
        ),
        ServiceSpec(
            "mqtt_bridge",
            "MQTT bridge",
            "mqtt_bridge",
            BridgeSettings,
            '"bridge running"',
            lambda w, _: [
                "--raw-topic",
                w.raw,
                "--dlq-topic",
                w.dlq,
                "--mqtt-topic-prefix",
                w.prefix,
                "--mqtt-client-id",
                w.bridge_client_id,
            ],
        ),
        ServiceSpec(
            "spark_join",
            "Spark join",
            "spark_jobs.join",
            JoinSettings,
            '"query running"',
            lambda w, work: [
                *_spark_args(w),
                "--joined-topic",
                w.joined,
                *(["--opstats-topic", w.opstats] if w.opstats else []),
                *(["--overloads-topic", w.overloads] if w.overloads else []),
                "--query-name",
                f"lsb-join{w.query_suffix}",
                "--checkpoint-dir",
                str(work / "checkpoints" / "join"),
            ],
        ),
        ServiceSpec(
            "spark_aggregate",
            "Spark aggregate",
            "spark_jobs.aggregate",
            AggregateSettings,
            '"query running"',
            lambda w, work: [
                *_spark_args(w),
                "--aggregates-topic",
                w.aggregates,
                "--query-name",
                f"aggregate{w.query_suffix}",
                "--checkpoint-dir",
                str(work / "checkpoints" / "aggregate"),
            ],
        ),
        ServiceSpec(
            "spark_single_pass",
            "Spark single pass",
            "spark_jobs.single_pass",
            SinglePassSettings,
            '"query running"',
            lambda w, work: [
                *_spark_args(w),
                "--joined-topic",
                w.joined,
                "--aggregates-topic",
                w.aggregates,
                *(["--opstats-topic", w.opstats] if w.opstats else []),
                *(["--overloads-topic", w.overloads] if w.overloads else []),
                "--query-name",
                f"single-pass{w.query_suffix}",
                "--checkpoint-dir",
                str(work / "checkpoints" / "single-pass"),
            ],
        ),
        ServiceSpec(
            "db_connector",
            "DB connector",
            "db_connector",
            ConnectorSettings,
            '"connector running"',
            lambda w, _: [
                "--topics",
                ",".join(w.connector_topics),
                "--influx-database",
                w.database,
                "--group-id",
                w.connector_group,
                "--instance-id",
                w.connector_group,
                *[
                    a
                    for kind, topic in w.connector_topics.items()
                    for a in (f"--{kind}-topic", topic)
                ],
            ],
        ),
        ServiceSpec(
            "alert_forwarder",
            "Alert forwarder",
            "alert_forwarder",
            ForwarderSettings,
            '"forwarding overload alerts"',
            lambda w, _: ["--overloads-topic", w.overloads] if w.overloads else [],
        ),
    )
}

#: The stages in start order, per shape of the Spark part; the simulator is started separately (it
#: is the input, not a stage). One pass per thing is the default: one read, one decode, one state
#: function call and one transaction per batch for the pairs and the windows together; the two
#: jobs remain for comparison and for an aggregate of the joined topic.
SHAPES: dict[str, tuple[str, ...]] = {
    "single-pass": ("mqtt_bridge", "spark_single_pass", "db_connector"),
    "two-jobs": ("mqtt_bridge", "spark_join", "spark_aggregate", "db_connector"),
}
DEFAULT_SHAPE = "single-pass"
STAGES = SHAPES[DEFAULT_SHAPE]
#: The Spark stages with windows: their batches run without data too (the idle timeout's timer),
#: and the batch after their input is complete closes the last windows.
WINDOWED = ("spark_aggregate", "spark_single_pass")


BRIDGE = "mqtt_bridge"


def service_of(stage: str) -> str:
    """The service a stage runs: a stage is a service, or a further shard of one
    (``mqtt_bridge@1``)."""
    return stage.partition("@")[0]


def sharded_stages(stages: tuple[str, ...], bridges: int) -> tuple[str, ...]:
    """``stages`` with ``bridges`` bridges on disjoint Thing shards: shard 0 keeps the plain
    name."""
    if bridges < 1:
        raise ValueError(f"bridges must be at least 1, not {bridges}")
    extra = tuple(f"{BRIDGE}@{shard}" for shard in range(1, bridges))
    return tuple(
        name for stage in stages for name in ((stage, *extra) if stage == BRIDGE else (stage,))
    )


def spark_stages(stages: tuple[str, ...]) -> tuple[str, ...]:
    """The Spark jobs among ``stages``: they report ``spark_input_rows_total`` and batches."""
    return tuple(
        name for name in stages if SERVICES[service_of(name)].module.startswith("spark_jobs.")
    )


def service_process(
    name: str,
    wiring: Wiring,
    log: Path,
    *extra: str,
    work_dir: Path | None = None,
    env: dict[str, str] | None = None,
) -> ServiceProcess:
    """One service on ``wiring`` with a free /metrics port, not started yet (tests and
    benchmarks that run a single stage; :class:`~stacktools.harness.pipeline.Pipeline` runs them
    all)."""
    args = SERVICES[name].args(wiring, work_dir or log.parent)
    return ServiceProcess(
        SERVICES[name].module, [*args, "--metrics-port", str(free_port()), *extra], log, env
    )
