"""python -m stacktools.demo: replay an events.json through the whole pipeline and report.

simulator -> MQTT -> bridge -> Kafka -> Spark join + aggregates -> Kafka -> connector ->
InfluxDB, every service a real process on the local stack (started if needed). The run gets
topics and an InfluxDB database of its own (names printed), so runs never mix. While it runs:
a status line every few seconds. When every stage has drained: a summary (rows, records,
joins, windows, late, dead letters, peak rate per stage, latency p50/p99) on stdout and in
<out>/summary.json, PNG plots in <out>/, and the verdict of `python -m stacktools.verify` (is
InfluxDB exactly what the file implies? exit code 1 if not). Without --keep-running everything
the demo started is stopped at the end (and on any failure); servers that ran before are left
running.

The events file is checked before anything starts: one that cannot be replayed (missing,
unreadable, not UTF-8, neither JSON lines nor a JSON array, empty, no valid row) is refused
with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from tqdm import tqdm

from simulator.generate import DEFAULT_ROWS, generate
from stacktools.demo import operation, plots
from stacktools.demo.report import rejected, render, summary
from stacktools.demo.run import replay_until_drained
from stacktools.demo.verdict import demo_verdict, stage_settings, statistics_run
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.services import DEFAULT_SHAPE, SERVICES, SHAPES
from stacktools.harness.wiring import Wiring
from stacktools.resources import EXAMPLE_CATALOGUE
from stacktools.stack import Stack, StackError
from stacktools.stack.process import KeptService, port_open
from stacktools.stack.servers import DEFAULT_GROUPS
from stacktools.stack.servers.spark import scaled_out_spark_env
from stacktools.stack.settings import Settings
from streamkit.events_file import EventsFileError
from streamkit.events_source import EventsCheck, check_events
from streamkit.logs import setup_logging

log = logging.getLogger("demo")


def events_file(args: argparse.Namespace) -> Path:
    """The given file, or a generated one (cached in the output folder: generating 1.4M rows
    takes a while)."""
    if args.events:
        return args.events
    path = args.out / f"events-{args.rows}-{args.things}-{args.components}.json"
    if not path.exists():
        partial = path.with_suffix(".partial")
        with partial.open("w") as handle:
            for row in tqdm(
                generate(args.rows, args.things, seed=1, components=args.components),
                total=args.rows,
                unit="row",
                desc="generating events.json",
                file=sys.stderr,
            ):
                handle.write(json.dumps(row) + "\n")
        partial.rename(path)
    return path


def stage_env(args: argparse.Namespace) -> dict[str, str]:
    """What the demo adds to the stages' environment: a generated file's machines are rated by
    the example catalogue, unless the user names one."""
    if args.events or stage_settings({}).machine_catalogue:
        return {}
    return {"MACHINE_CATALOGUE": str(EXAMPLE_CATALOGUE)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stacktools.demo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--events",
        type=Path,
        help="events file to replay: JSON lines or a JSON array, UTF-8 (a byte-order mark and CRLF "
        "are fine), plain or gzip; checked before anything starts (default: generate one)",
    )
    parser.add_argument(
        "--rows", type=int, default=DEFAULT_ROWS, help="rows to generate without --events"
    )
    parser.add_argument("--things", type=int, default=100, help="machines in the generated file")
    parser.add_argument(
        "--components",
        type=int,
        default=3,
        help="drives per generated machine: a spindle C11 and axes C12, ... (their ratings: "
        "examples/machine-catalogue.yaml, used unless MACHINE_CATALOGUE names another)",
    )
    parser.add_argument(
        "--rate", type=float, default=0.0, help="rows/s to replay at (default: as fast as possible)"
    )
    parser.add_argument(
        "--live",
        action="store_true",
        help="stamp rows with the wall clock as they are published: event-to-InfluxDB latency "
        "becomes measurable and dashboards on 'last 15 minutes' show the run",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("demo-output"), help="folder for the summary and plots"
    )
    parser.add_argument(
        "--keep-running", action="store_true", help="leave the stack and services up to explore"
    )
    parser.add_argument(
        "--timeout-s", type=float, default=3600, help="give up waiting for the drain after this"
    )
    parser.add_argument(
        "--spark-cluster",
        action="store_true",
        help="run Spark on the launcher's standalone cluster (started if needed: a master and "
        "SPARK_WORKERS workers), the output written from the executors (SPARK_SINK=executors); "
        "with --kafka-brokers 3 the whole scaled-out stack",
    )
    parser.add_argument(
        "--bridges",
        type=int,
        default=1,
        help="MQTT bridges on disjoint Thing shards (the simulator publishes Thing X under "
        "<prefix>/<crc32(X) mod N>/X; bridge k subscribes to <prefix>/k/#)",
    )
    parser.add_argument(
        "--shape",
        choices=list(SHAPES),
        default=DEFAULT_SHAPE,
        help="the Spark part: one stateful pass per thing (default), or the join and the aggregate "
        "as two jobs",
    )
    settings, args = Settings.parse(argv, parser=parser)
    setup_logging("WARNING", service="demo")
    try:  # the user's file, before anything starts (a generated one is checked once written)
        checked = check_events(args.events) if args.events else None
    except EventsFileError as exc:
        print(f"[demo] cannot replay {exc}", file=sys.stderr, flush=True)
        return 2
    server_logs = (
        f"server logs: {settings.run_dir.resolve() / 'logs'} "
        "(or `.venv/bin/python -m stacktools.stack logs`)"
    )
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        events = events_file(args)
        return run(settings, args, events, checked or check_events(events))
    except EventsFileError as exc:
        print(f"[demo] cannot replay {exc}", file=sys.stderr, flush=True)
        return 2
    except StackError as exc:
        print(
            f"\n[demo] the local stack did not start: {exc}\n[demo] {server_logs}", file=sys.stderr
        )
        return 2
    except (RuntimeError, TimeoutError) as exc:
        print(
            f"\n[demo] failed: {exc}\n[demo] service logs: "
            f"{args.out.resolve()}/run-<id>/<service>.log (the folder printed above); "
            f"{server_logs}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("\n[demo] interrupted: what the demo started is stopped", file=sys.stderr)
        return 130
    except (
        Exception
    ) as exc:  # a bug of ours: still one line, and everything started is stopped (run's finally)
        print(
            f"\n[demo] failed: {type(exc).__name__}: {exc}\n[demo] {server_logs}", file=sys.stderr
        )
        return 1


def run(settings: Settings, args: argparse.Namespace, events: Path, checked: EventsCheck) -> int:
    """Stack up, fresh topics and database, the services, the replay, the report. Whatever this
    run started is stopped at the end, and on any failure even with --keep-running; servers that
    ran before it are left running."""
    stack = Stack(settings, [*DEFAULT_GROUPS, *(["spark"] if args.spark_cluster else [])])
    not_running = stack.groups_not_running()
    pipeline: Pipeline | None = None
    succeeded = False
    verified = True
    try:
        print(f"starting the local stack ({', '.join(stack.names)}) ...", flush=True)
        settings = stack.up()  # a first run generates the passwords only now
        spark_env = scaled_out_spark_env(settings) if args.spark_cluster else {}
        stages = stage_env(args)
        wiring = Wiring.fresh(settings, "demo")
        default_ports = not any(
            port_open(port) for port in (spec.metrics_port for spec in SERVICES.values())
        )
        # checkpoints and logs of this run only
        work_dir = args.out / f"run-{wiring.query_suffix.strip('-')}"
        pipeline = Pipeline(
            settings,
            wiring,
            work_dir,
            default_ports=default_ports,
            shape=args.shape,
            env={**spark_env, **stages},
            bridges=args.bridges,
        )
        for name, value in stages.items():
            print(f"{name}={value} (the generated machines' ratings)", flush=True)
        print(
            f"replaying {events} ({checked.rows_in_file:,} rows, {checked.layout.describe()}) "
            f"through topics *.{wiring.query_suffix[1:]}, InfluxDB database {wiring.database}; "
            f"service logs in {work_dir}",
            flush=True,
        )
        started = time.monotonic()
        pipeline.start_stages()
        statistics = statistics_run(stage_settings({**spark_env, **stages}))
        if statistics:  # the overload alerts of the statistics, to the stack's Alertmanager
            pipeline.start("alert_forwarder")
        print("starting the services (Spark's JVMs take a while) ...", flush=True)
        pipeline.wait_ready()
        # generated files are in event-time order
        replay_args = [
            *(["--rate", str(args.rate)] if args.rate else []),
            *(["--live"] if args.live else []),
            *([] if args.events else ["--order", "file"]),
        ]
        replay = replay_until_drained(pipeline, events, replay_args, args.timeout_s)
        if (
            not replay.drained
            and replay.simulator_exit in (None, 0)
            and replay.simulator.get("rows_published")
        ):
            print(
                f"WARNING: not drained after {args.timeout_s:.0f} s; reporting what landed so far",
                flush=True,
            )
        elapsed = time.monotonic() - started
        result = summary(
            settings,
            wiring.database,
            replay.samples,
            replay.metrics,
            checked.rows_in_file,
            elapsed,
            args.live,
        )
        result["operation_statistics"] = operation.summary(settings, wiring.database)
        if statistics:
            result["overload_alerts"] = operation.alerts(settings, wiring.database)
        result["rejected"] = rejected(replay.simulator)
        result["simulator_exit_code"] = replay.simulator_exit
        result["database"], result["raw_topic"] = wiring.database, wiring.raw
        result["topics"] = wiring.connector_topics  # where this run's records are, by kind
        print("checking the output against the file (verify) ...", flush=True)
        order = "event-time" if args.events else "file"
        result["verify"] = demo_verdict(
            settings,
            events,
            wiring.database,
            order,
            args.live,
            env={**spark_env, **stages},
        )
        verdict_text = result["verify"].pop("text", f"verify: {result['verify'].get('skipped')}")
        (args.out / "summary.json").write_text(json.dumps(result, indent=2, default=str))
        print("\n" + render(result))
        written = [
            plots.throughput(replay.samples, args.out / "throughput.png"),
            plots.latency(replay.samples, args.live, args.out / "latency.png"),
            plots.joined_power(settings, wiring.database, args.out / "joined_power.png"),
            plots.window_aggregates(settings, wiring.database, args.out / "window_aggregates.png"),
            operation.picture(
                settings,
                wiring.database,
                result["operation_statistics"],
                args.out / "operation_statistics.png",
            ),
        ]
        print("plots: " + ", ".join(str(p) for p in written if p))
        print("\n" + verdict_text, flush=True)
        succeeded = replay.simulator_exit in (None, 0)
        verified = result["verify"].get("exact", True)
    finally:
        if not (succeeded and args.keep_running):
            stop_started(settings, pipeline, not_running)
    if not succeeded:
        print(
            f"[demo] the simulator exited with code {replay.simulator_exit}: "
            f"see {pipeline.log('simulator')}",
            file=sys.stderr,
        )
        return 1
    if not verified:
        print(
            f"[demo] verify: the output differs from what the file implies (details above and in "
            f"{args.out / 'summary.json'})",
            file=sys.stderr,
        )
        return 1
    if args.keep_running:
        for (
            name,
            service,
        ) in pipeline.services.items():  # `stack down` stops them, `stack status` shows them
            if service.alive() and service.process is not None:
                KeptService.record(settings.run_dir, name, service.process.pid, pipeline.log(name))
        print(
            f"\nstill running. Prometheus: http://127.0.0.1:{settings.prometheus_port}  InfluxDB: "
            f"{settings.influx_base_url} (database {wiring.database}, "
            f"credentials in {settings.credentials_path}).\n"
            "`.venv/bin/python -m stacktools.stack status` lists the servers and the services; "
            "`.venv/bin/python -m stacktools.stack down` stops both, the services first."
        )
    return 0


def stop_started(settings: Settings, pipeline: Pipeline | None, not_running: list[str]) -> None:
    """Stop the services (the simulator first), then the servers this run started, each step on
    its own: one that fails must not leave the rest running."""
    if pipeline is not None:
        try:
            pipeline.stop()
        except Exception as exc:  # e.g. a stage that ignores SIGTERM past the timeout
            print(
                f"[demo] stopping the services: {type(exc).__name__}: {exc}; killing them",
                file=sys.stderr,
            )
            for service in pipeline.services.values():
                if service.alive():
                    service.kill9()
    if not_running:  # stop only what the demo started
        try:
            Stack(settings, not_running).down()
        except Exception as exc:
            print(
                f"[demo] could not stop the servers it started ({', '.join(not_running)}): {exc}; "
                "`.venv/bin/python -m stacktools.stack down` stops them",
                file=sys.stderr,
            )
