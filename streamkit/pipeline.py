"""The whole pipeline as processes: start, supervise, kill, stop.

simulator -> bridge -> Spark join + aggregates -> connector, each ``python -m <service>`` in its
own process group (harness.Service), on one set of topics and one InfluxDB database. Used by
the demo (default topics, default metrics ports scraped by the local Prometheus) and by the
end-to-end tests and benchmark (private topics, free ports registered with Prometheus as file
targets), so all of them run the services exactly as a user does.
"""
from __future__ import annotations

import dataclasses
import json
import time
import urllib.request
import uuid
from collections.abc import Callable, Collection
from pathlib import Path

from streamkit.config import Settings
from streamkit.harness import Service, free_port, new_lane, private_database, private_topic
from streamkit.metrics import DEFAULT_METRICS_PORTS
from streamkit.stack.components import InfluxDB
from streamkit.topics import load_topic_specs, provision

#: Services in start order; the simulator is started separately (it is the input, not a stage).
STAGES = ("mqtt_bridge", "spark_join", "spark_aggregate", "db_connector")


@dataclasses.dataclass(frozen=True)
class Wiring:
    """Where the stages meet: topics, MQTT prefix, identities, database."""

    raw: str
    dlq: str
    joined: str
    aggregates: str
    late: str
    markers: str
    prefix: str
    bridge_client_id: str
    query_suffix: str
    connector_group: str
    database: str

    @classmethod
    def default(cls, settings: Settings) -> "Wiring":
        """The names a user's stack has (kafka/topics.yaml, the default database)."""
        return cls(settings.raw_topic, settings.dlq_topic, settings.joined_topic, settings.aggregates_topic,
                   settings.late_topic, "machinedata.commit-markers", settings.mqtt_topic_prefix, "mqtt-bridge-1",
                   "", "db-connector", settings.influx_database)

    @classmethod
    def private(cls, settings: Settings) -> "Wiring":
        """Fresh test topics, prefix, ids and database: runs never see each other's data."""
        lane = new_lane(settings)
        tag = lane.prefix
        return cls(lane.raw_topic, lane.dlq_topic, private_topic(settings, "joined", 2),
                   private_topic(settings, "aggregates", 2), private_topic(settings, "late", 2),
                   private_topic(settings, "markers", 1, compact=True), tag, lane.client_id, f"-{tag}",
                   f"db-connector-{tag}", private_database(settings))

    @classmethod
    def fresh(cls, settings: Settings, label: str) -> "Wiring":
        """A run of its own with the declared topic settings (kafka/topics.yaml) under names
        ``<topic>.<label>-<id>``, e.g. for a demo run that must not mix with earlier ones."""
        tag = f"{label}-{uuid.uuid4().hex[:6]}"
        specs = {s.name: dataclasses.replace(s, name=f"{s.name}.{tag}")
                 for s in load_topic_specs(settings.topic_partitions)}
        provision(settings, list(specs.values()))
        names = {name.removeprefix("machinedata."): spec.name for name, spec in specs.items()}
        database = tag.replace("-", "_")
        InfluxDB(settings).create_database(database)
        return cls(names["raw"], names["dlq"], names["joined"], names["aggregates"], names["late"],
                   names["commit-markers"], f"{settings.mqtt_topic_prefix}/{tag}", f"bridge-{tag}", f"-{tag}",
                   f"db-connector-{tag}", database)

    @property
    def connector_topics(self) -> dict[str, str]:
        return {"raw": self.raw, "joined": self.joined, "aggregates": self.aggregates, "late": self.late,
                "dlq": self.dlq}


class Pipeline:
    """The stages' processes. ``default_ports`` uses the services' default /metrics ports (the
    local Prometheus scrapes them); otherwise free ports are registered as Prometheus file
    targets, removed again by ``stop``."""

    def __init__(self, settings: Settings, wiring: Wiring, work_dir: Path, *, default_ports: bool = False,
                 extra_args: dict[str, list[str]] | None = None, env: dict[str, str] | None = None) -> None:
        self.settings, self.wiring, self.work_dir = settings, wiring, work_dir
        self.default_ports = default_ports
        self.extra_args = extra_args or {}
        self.env = env or {}
        self.services: dict[str, Service] = {}
        self.ports: dict[str, int] = {}
        self.restarts: dict[str, int] = dict.fromkeys(STAGES, 0)
        self._log_offsets: dict[str, int] = {}
        self._run_tag = uuid.uuid4().hex[:8]
        work_dir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------------- commands
    def _args(self, name: str) -> list[str]:
        w = self.wiring
        common_spark = ["--raw-topic", w.raw, "--late-topic", w.late, "--marker-topic", w.markers]
        args = {
            "simulator": ["--mqtt-topic-prefix", w.prefix, "--no-progress"],
            "mqtt_bridge": ["--raw-topic", w.raw, "--dlq-topic", w.dlq, "--mqtt-topic-prefix", w.prefix,
                            "--mqtt-client-id", w.bridge_client_id],
            "spark_join": [*common_spark, "--joined-topic", w.joined, "--query-name", f"lsb-join{w.query_suffix}",
                           "--checkpoint-dir", str(self.work_dir / "checkpoints" / "join")],
            "spark_aggregate": [*common_spark, "--aggregates-topic", w.aggregates,
                                "--query-name", f"aggregate{w.query_suffix}",
                                "--checkpoint-dir", str(self.work_dir / "checkpoints" / "aggregate")],
            "db_connector": ["--topics", ",".join(w.connector_topics), "--influx-database", w.database,
                             "--group-id", w.connector_group, "--instance-id", w.connector_group,
                             *[a for kind, topic in w.connector_topics.items() for a in (f"--{kind}-topic", topic)]],
        }[name]
        return [*args, "--metrics-port", str(self._port(name)), *self.extra_args.get(name, [])]

    def _port(self, name: str) -> int:
        if name not in self.ports:
            self.ports[name] = DEFAULT_METRICS_PORTS[name] if self.default_ports else free_port()
            if not self.default_ports:
                self._register_target(name, self.ports[name])
        return self.ports[name]

    def _register_target(self, name: str, port: int) -> None:
        target = self._target_file(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps([{"targets": [f"127.0.0.1:{port}"], "labels": {"service": name}}]))

    def _target_file(self, name: str) -> Path:
        return self.settings.run_dir / "prometheus" / "targets" / f"pipeline-{self._run_tag}-{name}.json"

    def _module(self, name: str) -> str:
        return {"spark_join": "spark_jobs.join", "spark_aggregate": "spark_jobs.aggregate"}.get(name, name)

    def log(self, name: str) -> Path:
        return self.work_dir / f"{name}.log"

    # ------------------------------------------------------------------------- lifecycle
    def start(self, name: str, *extra: str) -> Service:
        log = self.log(name)
        self._log_offsets[name] = log.stat().st_size if log.exists() else 0
        env = {**self.settings.as_environment(), **self.env}  # run dir, ports and credentials in effect
        service = Service(self._module(name), [*self._args(name), *extra], self.log(name), env).start()
        self.services[name] = service
        return service

    def start_stages(self, wait_for: Callable[[str, Service], None] | None = None) -> None:
        for name in STAGES:
            service = self.start(name)
            if wait_for is not None:
                wait_for(name, service)

    #: What each stage logs once it is ready to take input.
    READY_LINES = {"mqtt_bridge": '"bridge running"', "spark_join": '"query running"',
                   "spark_aggregate": '"query running"', "db_connector": '"connector running"'}

    def wait_ready(self, timeout_s: float = 300) -> None:
        """Until every stage is ready (Spark's JVM start-up takes tens of seconds): a replay
        started after this measures the pipeline, not its start-up."""
        deadline = time.monotonic() + timeout_s
        for name, line in self.READY_LINES.items():
            self.wait_logged(name, line, max(1.0, deadline - time.monotonic()))

    def replay(self, events: Path, *args: str) -> Service:
        return self.start("simulator", "--input", str(events), *args)

    def kill9(self, name: str) -> None:
        self.services[name].kill9()

    def restart(self, name: str) -> Service:
        self.restarts[name] = self.restarts.get(name, 0) + 1
        return self.start(name)

    def supervise(self, skip: Collection[str] = ()) -> list[str]:
        """Restart every stage that is not running (as systemd or compose would), but those in
        ``skip`` (held down on purpose); the names."""
        restarted = [name for name in STAGES
                     if name in self.services and name not in skip and not self.services[name].alive()]
        for name in restarted:
            self.restart(name)
        return restarted

    def stop(self, timeout_s: float = 120) -> dict[str, int | None]:
        """SIGTERM from the input on, so each stage can drain into the next before it stops."""
        codes: dict[str, int | None] = {}
        for name in ("simulator", *STAGES):
            service = self.services.get(name)
            if service is not None and service.alive():
                codes[name] = service.terminate(timeout_s)
        for name in self.ports:
            self._target_file(name).unlink(missing_ok=True)
        return codes

    # ------------------------------------------------------------------------- observation
    def metrics(self, name: str) -> dict[str, float]:
        """The service's /metrics as {'name{labels}': value} (empty when it is down)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[name]}/metrics", timeout=5) as response:
                text = response.read().decode()
        except (OSError, KeyError):
            return {}
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                try:
                    values[key] = float(value)
                except ValueError:
                    continue
        return values

    def logged_since_start(self, name: str) -> str:
        """The log of the service's current run (logs are appended across restarts)."""
        with self.log(name).open("rb") as handle:
            handle.seek(self._log_offsets.get(name, 0))
            return handle.read().decode(errors="replace")

    def wait_logged(self, name: str, text: str, timeout_s: float) -> None:
        """Until the current run of the service logged `text` (e.g. the bridge's "bridge running")."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if text in self.logged_since_start(name):
                return
            if not self.services[name].alive():
                raise RuntimeError(f"{name} exited before logging {text!r}: {self.log(name).read_text()[-2000:]}")
            time.sleep(0.2)
        raise TimeoutError(f"{name} did not log {text!r} within {timeout_s}s")
