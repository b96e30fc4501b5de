"""python -m stacktools.stack up|down|status|logs|provision [component ...]
python -m stacktools.stack status --pipeline [--watch SECONDS]
python -m stacktools.stack machine-user [Thing ...] [--events FILE]
python -m stacktools.stack render --into DIR --kafka-cluster-id=ID --kafka-host-ports=PORT,...

Runs the real servers of the stack as local processes on 127.0.0.1; data, logs, pid files and
generated credentials live under the run directory (default ./run, STACK_RUN_DIR). ``provision``
only creates the users, rights, topics and databases on servers running elsewhere (docker
compose), with the passwords given in the environment. ``machine-user`` makes an MQTT user per
Thing (MQTT_MACHINE_IDENTITIES), its password in <run dir>/machine-credentials.json (0600), and
makes a running Mosquitto take it at once. ``render`` writes the servers' configurations for
docker compose (its one-shot ``config`` job), each under DIR/<server>/, as its container needs
them. ``status --pipeline`` adds the running pipeline as
a graph, each stage with its rate, backlog, last progress, dead letters and alerts (from
Prometheus); ``--watch`` redraws it until interrupted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from stacktools.stack import Stack, make_machine_users
from stacktools.stack.errors import LauncherError
from stacktools.stack.mqtt_users import things_of
from stacktools.stack.process import ManagedProcess, tail
from stacktools.stack.render import ComposeCluster, render
from stacktools.stack.servers import DEFAULT_GROUPS, OPTIONAL_GROUPS
from stacktools.stack.settings import Settings
from streamkit.cli import HelpFormatter, entry_point, program_name


def print_status(stack: Stack) -> bool:
    rows = stack.status()
    print(f"{'component':<15} {'state':<10} {'pid':>7}  {'address':<24} log")
    for row in rows:
        print(f"{row.name:<15} {row.state:<10} {row.pid or '-':>7}  {row.address:<24} {row.log}")
    print(
        f"run directory: {stack.settings.run_dir}  (credentials: {stack.settings.credentials_path})"
    )
    return all(row.state in {"running", "external"} for row in rows)


def print_pipeline(settings: Settings) -> None:
    """The pipeline graph, drawn by the dashboards' tool (``python -m stacktools.dashboards
    pipeline``) in a process of its own: the launcher stands below the tools that read what
    it runs, so it asks them rather than importing them."""
    sys.stdout.flush()
    subprocess.run(
        [sys.executable, "-m", "stacktools.dashboards", "pipeline"],
        env={**os.environ, **settings.as_environment()},
        check=False,
    )


def watch_pipeline(stack: Stack, every_s: float) -> int:
    """The servers and the pipeline graph, redrawn every ``every_s`` seconds until Ctrl-C."""
    while True:
        print("\033[2J\033[H", end="")  # clear the terminal, cursor home
        print_status(stack)
        print_pipeline(stack.settings)
        time.sleep(every_s)


def follow(processes: list[ManagedProcess]) -> None:
    offsets = {p.name: (p.log_file.stat().st_size if p.log_file.exists() else 0) for p in processes}
    while True:
        for process in processes:
            if process.log_file.exists():
                with process.log_file.open("rb") as handle:
                    handle.seek(offsets[process.name])
                    for line in handle.read().decode("utf-8", "replace").splitlines():
                        print(f"{process.name}| {line}")
                    offsets[process.name] = handle.tell()
        time.sleep(0.5)


def machine_user(settings: Settings, things: list[str]) -> int:
    """Make the machine users ``things`` (those that have none yet) and have a running
    Mosquitto take them."""
    try:
        made = make_machine_users(settings, things)
    except ValueError as exc:
        print(f"[stack] machine-user: {exc}", file=sys.stderr)
        return 2
    print(
        f"[stack] machine users: {len(made)} made, {len(things) - len(made)} had one; passwords "
        f"in {settings.machine_credentials_path}"
    )
    if not settings.mqtt_machine_identities:
        print(
            "[stack] MQTT_MACHINE_IDENTITIES is off: Mosquitto grants machine users no right "
            "until the stack is started with it on"
        )
    return 0


def render_compose(settings: Settings, into: Path, cluster: ComposeCluster) -> int:
    """Write compose's server configurations; 1, naming them, on passwords the rules refuse."""
    try:
        written = render(settings, into, cluster)
    except LauncherError as exc:
        print(f"[stack] render: {exc}", file=sys.stderr)
        return 1
    print(f"[stack] rendered {len(written)} configuration files into {into}")
    return 0


@entry_point("stacktools.stack")
def main(argv: list[str] | None = None) -> int:
    names = list(DEFAULT_GROUPS)
    optional = ", ".join(OPTIONAL_GROUPS)
    parser = argparse.ArgumentParser(
        prog=program_name("stacktools.stack"),
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "action", choices=["up", "down", "status", "logs", "provision", "machine-user", "render"]
    )
    parser.add_argument(
        "components",
        nargs="*",
        metavar="component",
        help=f"subset of: {', '.join(names)} (default all of these; kafka is KAFKA_BROKERS nodes), "
        f"and the optional {optional} (a standalone master and SPARK_WORKERS workers; only "
        "when named); for machine-user: the Things",
    )
    parser.add_argument(
        "--events",
        type=Path,
        metavar="FILE",
        help="machine-user: a user for every Thing of this events file too",
    )
    parser.add_argument(
        "--pipeline",
        action="store_true",
        help="status: the running pipeline as a graph, each stage's figures from Prometheus",
    )
    parser.add_argument(
        "--watch",
        type=float,
        metavar="SECONDS",
        help="status --pipeline: redraw every SECONDS until Ctrl-C",
    )
    parser.add_argument(
        "--into",
        type=Path,
        metavar="DIR",
        help="render: where compose's configuration volumes are mounted, one per server",
    )
    parser.add_argument(
        "--kafka-cluster-id",
        metavar="ID",
        help="render: the KRaft cluster id Kafka's storage is formatted with",
    )
    parser.add_argument(
        "--kafka-host-ports",
        metavar="PORT,...",
        help="render: the host port each Kafka node's client listener is published on",
    )
    parser.add_argument("-n", "--lines", type=int, default=40, help="logs: lines per component")
    parser.add_argument("-f", "--follow", action="store_true", help="logs: keep printing new lines")
    settings, args = Settings.parse(argv, parser=parser)
    settings.log_legacy()  # its children get the new spelling (as_environment) and say nothing
    if args.action == "machine-user":
        things = [*args.components, *(things_of(args.events) if args.events else [])]
        if not things:
            parser.error("machine-user: name at least one Thing, or --events FILE")
        return machine_user(settings, things)
    if args.action == "render":
        if not (args.into and args.kafka_cluster_id and args.kafka_host_ports):
            parser.error("render: give --into, --kafka-cluster-id and --kafka-host-ports")
        try:
            ports = tuple(int(port) for port in args.kafka_host_ports.split(","))
        except ValueError:
            parser.error(f"render: --kafka-host-ports {args.kafka_host_ports!r} is no port list")
        return render_compose(settings, args.into, ComposeCluster(args.kafka_cluster_id, ports))
    try:
        stack = Stack(settings, args.components or None)
        if args.action == "up":
            print(f"[stack] starting {', '.join(stack.names)} (waiting until healthy)", flush=True)
            stack.up()
            return 0 if print_status(stack) else 1
        if args.action == "provision":
            stack.provision()
            return 0
        if args.action == "down":
            stopped = stack.down()
            print(f"[stack] stopped: {', '.join(stopped) if stopped else 'nothing was running'}")
            return 0
        if args.action == "status":
            if args.watch:
                return watch_pipeline(stack, args.watch)
            healthy = print_status(stack)
            if args.pipeline:
                print_pipeline(settings)
            return 0 if healthy else 1
        processes = [ManagedProcess(name, settings.run_dir) for name in stack.names]
        for process in processes:
            print(f"==> {process.log_file} <==\n{tail(process.log_file, args.lines)}")
        if args.follow:
            follow(processes)
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
