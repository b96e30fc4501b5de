"""Shared helpers of the Spark tests: private topics, reading to the true end, running drivers."""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import Message

from stacktools.harness.processes import ServiceProcess
from stacktools.harness.wiring import private_topic
from stacktools.stack.process import free_port, group_alive
from stacktools.stack.settings import Settings
from streamkit.deadline import wait_until
from streamkit.kafka_clients import transactional_producer
from streamkit.kafka_io import read_to_end
from streamkit.paths import REPO_ROOT as REPO


def key_values(messages: list[Message]) -> Counter:
    """The multiset of (key, value): what exactly-once is judged on."""
    return Counter((m.key(), m.value()) for m in messages)


def produce_committed(
    settings: Settings, records: Sequence[tuple[str, bytes, bytes, int | None]]
) -> None:
    """(topic, key, value, partition) records in one committed transaction: all visible at once."""
    producer = transactional_producer(settings, f"test-feed-{uuid.uuid4().hex[:8]}")
    producer.begin_transaction()
    for topic, key, value, partition in records:
        if partition is None:
            producer.produce(topic, key=key, value=value)
        else:
            producer.produce(topic, key=key, value=value, partition=partition)
        producer.poll(0)
    producer.commit_transaction()


def spark_service(
    module: str, args: list[str], log: Path, env: dict[str, str] | None = None
) -> ServiceProcess:
    """A job as a subprocess (python -m module) with a private metrics port."""
    return ServiceProcess(module, [*args, "--metrics-port", str(free_port())], log, env)


def wait_pid_gone(pid_file: Path, timeout_s: float = 60) -> None:
    """After a SIGKILL of the Python driver its JVM exits on stdin EOF; a restart must not
    overlap with it (two drivers on one checkpoint)."""
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().strip())

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, timeout_s, f"JVM {pid} gone after its driver died", interval_s=0.2)


def wait_driver_gone(job: ServiceProcess, timeout_s: float = 120) -> None:
    """A driver that ended (a SIGKILL at a fault point, an exit) leaves its JVM until that reads
    EOF on its stdin; a restart must not overlap with it (two drivers on one checkpoint). The
    JVM is in the driver's process group, so: until that group is empty. The timeout only
    catches a hang."""
    if job.process is None:
        raise RuntimeError(f"{job.module} was never started")
    pgid = job.process.pid
    wait_until(
        lambda: not group_alive(pgid),
        timeout_s,
        f"process group of {job.module} gone",
        interval_s=0.2,
    )


def log_tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


__all__ = [
    "REPO",
    "private_topic",
    "read_to_end",
    "key_values",
    "produce_committed",
    "spark_service",
    "wait_pid_gone",
    "wait_driver_gone",
    "log_tail",
]
