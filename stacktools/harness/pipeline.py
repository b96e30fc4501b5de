"""The whole pipeline as processes: start, supervise, kill, stop.

simulator -> bridge -> Spark (one pass, or the join and the aggregate) -> connector, each
``python -m <service>`` in its own process group (processes.ServiceProcess), on one set of topics
and one InfluxDB database. Used by the demo (default topics and metrics ports) and by the
end-to-end tests and benchmark (private topics, free ports); every stage is registered with the
local Prometheus as a file target while it runs, so all of them run the services exactly as a user
does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Collection
from pathlib import Path

from stacktools.harness.processes import ServiceProcess
from stacktools.harness.scrape import scrape_metrics
from stacktools.harness.services import (
    BRIDGE,
    DEFAULT_SHAPE,
    SERVICES,
    SHAPES,
    service_of,
    sharded_stages,
)
from stacktools.harness.wiring import Wiring
from stacktools.stack.process import free_port
from stacktools.stack.settings import Settings
from streamkit.deadline import Deadline


class Pipeline:
    """The stages' processes. ``default_ports`` uses the services' default /metrics ports,
    otherwise free ones; either way each stage is registered with the local Prometheus as a file
    target, removed again by ``stop``. ``bridges``: that many bridges on disjoint Thing shards
    (stages ``mqtt_bridge``, ``mqtt_bridge@1``, ...; the simulator publishes under the shards)."""

    def __init__(
        self,
        settings: Settings,
        wiring: Wiring,
        work_dir: Path,
        *,
        default_ports: bool = False,
        extra_args: dict[str, list[str]] | None = None,
        env: dict[str, str] | None = None,
        shape: str = DEFAULT_SHAPE,
        bridges: int = 1,
    ) -> None:
        self.settings, self.wiring, self.work_dir = settings, wiring, work_dir
        self.bridges = bridges
        self.stages = sharded_stages(SHAPES[shape], bridges)
        self.default_ports = default_ports
        self.extra_args = extra_args or {}
        self.env = env or {}
        self.services: dict[str, ServiceProcess] = {}
        self.ports: dict[str, int] = {}
        self.restarts: dict[str, int] = dict.fromkeys(self.stages, 0)
        self._run_tag = uuid.uuid4().hex[:8]
        work_dir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------------- commands
    def _wiring(self, name: str) -> Wiring:
        """The wiring of one stage: a sharded bridge's prefix and MQTT session are its shard's."""
        if service_of(name) != BRIDGE:
            return self.wiring
        return self.wiring.bridge_shard(int(name.partition("@")[2] or 0), self.bridges)

    def _args(self, name: str) -> list[str]:
        service = service_of(name)
        return [
            *SERVICES[service].args(self._wiring(name), self.work_dir),
            "--metrics-port",
            str(self._port(name)),
            *self.extra_args.get(service, []),
        ]

    def _port(self, name: str) -> int:
        if name not in self.ports:
            default = self.default_ports and name in SERVICES  # a further bridge shard: a free port
            self.ports[name] = SERVICES[name].metrics_port if default else free_port()
            self._register_target(name, self.ports[name])
        return self.ports[name]

    def _register_target(self, name: str, port: int) -> None:
        """Prometheus scrapes a stage while its target file exists: from its start to its
        clean stop (``stop``), so a pipeline stopped on purpose leaves no target that is down
        (a crashed stage keeps its file: that one alerts)."""
        target = self._target_file(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        service = service_of(name)
        target.write_text(
            json.dumps(
                [
                    {
                        "targets": [f"127.0.0.1:{port}"],
                        "labels": {"service": service, "job": service},
                    }
                ]
            )
        )

    def _target_file(self, name: str) -> Path:
        return (
            self.settings.run_dir
            / "prometheus"
            / "targets"
            / f"pipeline-{self._run_tag}-{name}.json"
        )

    def log(self, name: str) -> Path:
        return self.work_dir / f"{name}.log"

    # ------------------------------------------------------------------------- lifecycle
    def start(self, name: str, *extra: str) -> ServiceProcess:
        # run dir, ports and credentials in effect
        env = {
            **self.settings.as_environment(),
            **self.env,
        }
        service = ServiceProcess(
            SERVICES[service_of(name)].module, [*self._args(name), *extra], self.log(name), env
        ).start()
        self.services[name] = service
        return service

    def start_stages(self, wait_for: Callable[[str, ServiceProcess], None] | None = None) -> None:
        for name in self.stages:
            service = self.start(name)
            if wait_for is not None:
                wait_for(name, service)

    def wait_ready(self, timeout_s: float = 300) -> None:
        """Until every stage is ready (Spark's JVM start-up takes tens of seconds): a replay
        started after this measures the pipeline, not its start-up."""
        deadline = Deadline(timeout_s)
        for name in self.stages:
            self.services[name].wait_logged(
                SERVICES[service_of(name)].ready_line, max(1.0, deadline.remaining())
            )

    def wait_bridges(self, timeout_s: float = 60) -> None:
        """Until every bridge is subscribed (its persistent session exists): a replay started
        after this loses nothing, while the Spark stages may still be starting."""
        for name in self.bridge_stages():
            self.services[name].wait_logged(SERVICES[BRIDGE].ready_line, timeout_s)

    def bridges_subscribed(self) -> bool:
        """Whether every bridge's current run is subscribed, so has taken the backlog its
        session kept (the broker sends it before the SUBACK); False while one is down."""
        ready = SERVICES[BRIDGE].ready_line
        runs = [self.services.get(name) for name in self.bridge_stages()]
        return all(
            run is not None and run.alive() and ready in run.logged_since_start() for run in runs
        )

    def bridge_stages(self) -> list[str]:
        """The names of the bridge stages (one per Thing shard)."""
        return [name for name in self.stages if service_of(name) == BRIDGE]

    def replay(self, events: Path, *args: str) -> ServiceProcess:
        if self.settings.mqtt_machine_identities:  # each Thing of the file logs in as itself
            from stacktools.stack import make_machine_users
            from stacktools.stack.mqtt_users import things_of

            make_machine_users(self.settings, things_of(events))
        return self.start("simulator", "--input", str(events), "--shards", str(self.bridges), *args)

    def kill9(self, name: str) -> None:
        self.services[name].kill9()

    def restart(self, name: str) -> ServiceProcess:
        self.restarts[name] = self.restarts.get(name, 0) + 1
        return self.start(name)

    def supervise(self, skip: Collection[str] = ()) -> list[str]:
        """Restart every stage that is not running (as systemd or compose would), but those in
        ``skip`` (held down on purpose); the names."""
        restarted = [
            name
            for name in self.stages
            if name in self.services and name not in skip and not self.services[name].alive()
        ]
        for name in restarted:
            self.restart(name)
        return restarted

    def stop(self, timeout_s: float = 120) -> dict[str, int | None]:
        """SIGTERM from the input on, so each stage can drain into the next before it stops;
        then the services started beside the stages (the alert forwarder)."""
        codes: dict[str, int | None] = {}
        beside = [name for name in self.services if name not in ("simulator", *self.stages)]
        for name in ("simulator", *self.stages, *beside):
            service = self.services.get(name)
            if service is not None and service.alive():
                codes[name] = service.terminate(timeout_s)
        for name in self.ports:
            self._target_file(name).unlink(missing_ok=True)
        return codes

    # ------------------------------------------------------------------------- observation
    def metrics(self, name: str) -> dict[str, float]:
        """The stage's /metrics as {'name{labels}': value} (empty when it is down); for a
        sharded service (the bridge) the sum over its shards, so it reads as one stage."""
        shards = [
            stage
            for stage in self.ports
            if (service_of(stage) == name if name in SERVICES else stage == name)
        ]
        total: dict[str, float] = {}
        for stage in shards:
            for key, value in scrape_metrics(self.ports[stage]).items():
                total[key] = total.get(key, 0.0) + value
        return total

    def logged_since_start(self, name: str) -> str:
        """The log of the service's current run (logs are appended across restarts)."""
        return self.services[name].logged_since_start()

    def wait_logged(self, name: str, text: str, timeout_s: float) -> None:
        self.services[name].wait_logged(text, timeout_s)
