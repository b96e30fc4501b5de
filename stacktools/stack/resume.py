"""Servers that a full disk stopped or wedged, started again by the launcher once it has room.

A full disk stops Kafka: a node shuts down when its log directory fails. InfluxDB 1.8 keeps
running but stays wedged: a shard's WAL writer keeps its error until the server restarts
(influxdata/influxdb#9923). Compose's restart policies bring back a container that exited. The
local stack has no such policy, and no policy unwedges a server that still runs. The disk
reporter watches these disks anyway, so it does what the runbook says to do by hand: once the
filesystem has room again, it runs the launcher for the server, `up` for a Kafka node (the
others keep running), `down` then `up` for InfluxDB (:class:`Resumer` says when).
"""

from __future__ import annotations

import logging
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client import Counter

from stacktools.stack.process import LOG_MARK, STARTING, STOPPING, ManagedProcess
from streamkit.paths import private_directory

log = logging.getLogger("stacktools.stack.resume")

#: What Kafka (Java: "No space left on device") and InfluxDB (Go: lower case) log for ENOSPC.
NO_SPACE = "no space left on device"
#: Free bytes below which a filesystem counts as full: a write of any size may fail.
FULL_BYTES = 1 << 20
#: The share of the filesystem that must be free again: where the disk alert ends
#: (DataDiskNearlyFull in prometheus/alerts.yml; a unit test keeps the two equal).
ROOM_SHARE = 0.10
#: How much of a log's end is read: the launcher's last start or stop and what followed it, or,
#: if that was rotated away, only lines written since.
TAIL_BYTES = 1 << 20
#: Least seconds between two launches for one server (the disk may fill again at once).
RETRY_S = 60.0
#: Seconds between two looks at its disk by compose's InfluxDB entry point.
COMPOSE_WATCH_S = 10

RESUMES = Counter(
    "disk_resumes_total",
    "servers the disk reporter started again after a full disk, by server and outcome",
    ["server", "outcome"],
)


def since_last_start(log_file: Path) -> str:
    """The log's text since the launcher last started or stopped the server (the end of the
    file when that line has been rotated away); empty when there is no log."""
    try:
        with log_file.open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - TAIL_BYTES))
            text = handle.read().decode("utf-8", "replace")
    except OSError:
        return ""
    at = len(text)
    while (at := text.rfind(LOG_MARK, 0, at)) >= 0:
        line_end = text.find("\n", at + 1)
        line = text[at + 1 : line_end if line_end >= 0 else len(text)]
        if f" {STARTING} " in line or line.endswith(f" {STOPPING}"):
            return text[at + 1 :]
    return text


def disk_was_full(log_file: Path) -> bool:
    """Whether the server logged a full disk since the launcher last started or stopped it (a
    stop by the launcher is a person's choice, never undone here)."""
    return NO_SPACE in since_last_start(log_file).lower()


def has_room(path: Path) -> bool:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return False
    return usage.total > 0 and usage.free / usage.total >= ROOM_SHARE


def compose_watch_settings() -> str:
    """The same rule for compose's InfluxDB, whose entry point (docker/influxdb/entrypoint.sh,
    a shell script: the image has no Python) watches its own disk: this file is sourced by it."""
    return (
        f"FULL_BYTES={FULL_BYTES}\nROOM_PERCENT={round(ROOM_SHARE * 100)}\n"
        f"WATCH_S={COMPOSE_WATCH_S}\n"
    )


def is_kafka_node(server: str) -> bool:
    return server == "kafka" or server.startswith("kafka-")


def launcher_steps(server: str) -> list[list[str]]:
    """The launcher's commands that bring ``server`` back: every Kafka node is the group
    ``kafka``, whose ``up`` starts the nodes that are down and leaves the others alone."""
    stack = [sys.executable, "-m", "stacktools.stack"]
    if is_kafka_node(server):
        return [[*stack, "up", "kafka"]]
    return [[*stack, "down", server], [*stack, "up", server]]


def is_full(path: Path) -> bool:
    try:
        return shutil.disk_usage(path).free < FULL_BYTES
    except OSError:
        return False


@dataclass
class Resumer:
    """One round at a time from the reporter's loop; a launch runs in the background, so the
    loop keeps its heartbeat while a server starts.

    A Kafka node is started when its log says the disk was full since the launcher last started
    or stopped it, and it no longer runs (a node still running survived it; a node the launcher
    stopped stays stopped). InfluxDB logs nothing of a failed write, so it is restarted when this
    reporter itself saw its disk full while the same process ran, and that process still runs."""

    servers: dict[str, Path]  # server -> its data directory
    run_dir: Path  # the launcher's: each server's log and pid file
    tried: dict[str, float] = field(default_factory=dict)
    running: dict[str, subprocess.Popen] = field(default_factory=dict)
    full_under: dict[str, int] = field(default_factory=dict)  # server -> the pid that saw it

    def round(self, now: float) -> None:
        self._reap()
        for server, data in self.servers.items():
            process = ManagedProcess(server, self.run_dir)
            pid = process.pid()
            if pid is not None and is_full(data):
                self.full_under[server] = pid
            if server in self.running or now - self.tried.get(server, -RETRY_S) < RETRY_S:
                continue
            if is_kafka_node(server):
                due = pid is None and disk_was_full(process.log_file)
            else:
                due = pid is not None and self.full_under.get(server) == pid
            if due and has_room(data):
                self.tried[server] = now
                self.full_under.pop(server, None)
                self._launch(server)

    def _launch(self, server: str) -> None:
        steps = launcher_steps(server)
        log.warning(
            "the disk had filled and has room again: starting the server again",
            extra={"server": server, "commands": [" ".join(step[1:]) for step in steps]},
        )
        script = " && ".join(shlex.join(step) for step in steps)
        try:
            output_file = ManagedProcess(f"resume-{server}", self.run_dir).log_file
            private_directory(output_file.parent)
            with output_file.open("ab") as output:
                self.running[server] = subprocess.Popen(
                    ["sh", "-c", script], stdout=output, stderr=subprocess.STDOUT
                )
        except OSError as exc:
            RESUMES.labels(server, "failed").inc()
            log.error("could not run the launcher", extra={"server": server, "error": str(exc)})

    def _reap(self) -> None:
        for server, process in list(self.running.items()):
            code = process.poll()
            if code is None:
                continue
            del self.running[server]
            RESUMES.labels(server, "ok" if code == 0 else "failed").inc()
            level = logging.INFO if code == 0 else logging.ERROR
            log.log(level, "the launcher finished", extra={"server": server, "exit_code": code})

    def stop(self) -> None:
        """A launch in flight goes on without the reporter (its own process): a server half
        started is worse than one started after its reporter stopped."""
        self._reap()
        for server in self.running:
            log.info("a launch goes on after the reporter stops", extra={"server": server})
