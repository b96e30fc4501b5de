"""Client-level fault injection: every call a service makes to Kafka or InfluxDB may fail.

Installed into a service process by ``tests/support/faults/site/sitecustomize.py`` (put that folder
on ``PYTHONPATH`` and set ``CLIENT_FAULTS``), before the service imports its clients, so the
services run unchanged. Each call draws from a seeded RNG (seed + pid: a restarted process draws new
faults) and may raise, before doing anything, an error of one kind. Besides the random faults, two
calls of each kind early in each process fail for sure (numbers drawn from the RNG), so every call a
process makes often enough shows its first two kinds whatever the seed: a test that checks which
kinds were exercised does not fail by chance. Deliveries are never forced (:data:`NEVER_FORCED`).

* ``retriable``: a timeout the client may retry (``KafkaError.retriable()``);
* ``non_retriable``: a plain failure (``_FAIL``);
* ``abortable``: the transaction must be aborted (``txn_requires_abort()``);
* ``fatal``: the producer is fenced (``fatal()``): it must not be used any more;
* ``unknown_outcome``: the call is made, *then* a timeout is raised: the server did the work
  but the client does not know. A retry of the same call then succeeds without redoing it, as
  librdkafka's retried transactional calls do.
* for Kafka deliveries, ``unknown_outcome`` turns a success into a failed delivery report
  (the record was written); for produce, ``buffer_full`` raises ``BufferError``.

Every injected fault is written to stderr as one JSON line (``"fault injected"``) so a test can
check that each kind was really exercised.
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Callable
from typing import Any
from unittest.mock import patch

#: Which kinds each call can fail with (a kind listed twice is drawn twice as often), and how
#: often (per call). Fatal errors are rarer: each costs a restart (a Spark job's takes ~30 s).
KAFKA_CALLS: dict[str, tuple[float, tuple[str, ...]]] = {
    "produce": (0.00002, ("buffer_full",) * 3 + ("non_retriable",)),  # per record: rare
    "produce_batch": (0.001, ("buffer_full", "retriable") * 2 + ("non_retriable",)),
    "begin_transaction": (0.05, ("retriable", "non_retriable") * 3 + ("fatal",)),
    "send_offsets_to_transaction": (
        0.15,
        ("abortable", "retriable", "unknown_outcome") * 2 + ("fatal",),
    ),
    "commit_transaction": (
        0.15,
        ("abortable", "unknown_outcome", "retriable", "non_retriable") * 2 + ("fatal",),
    ),
    "abort_transaction": (0.05, ("retriable",) * 4 + ("fatal",)),
    "commit": (0.1, ("retriable", "non_retriable", "unknown_outcome")),
    "consume": (0.001, ("retriable",)),
    "poll": (0.0005, ("retriable",)),
    "delivery": (0.00005, ("unknown_outcome",)),
}
INFLUX_WRITE: tuple[float, tuple[str, ...]] = (0.05, ("connection", "server", "unknown_outcome"))
#: Calls never forced: a failed delivery ends the bridge by design (the broker redelivers the
#: message to the next run), so one forced early in every process would restart it in a loop.
NEVER_FORCED = frozenset({"delivery"})


class FaultPlan:
    """Decides, per call, whether and how it fails."""

    def __init__(self, seed: int, scale: float) -> None:
        self.rng = random.Random(seed)
        self.scale = scale
        self.pending_success: set[str] = set()  # calls whose last attempt did the work
        self.next_kinds: dict[str, list[str]] = {}
        self.calls: dict[str, int] = {}
        self.forced: dict[str, set[int]] = {}  # which calls (1-based) of each kind fail for sure

    def _forced(self, call: str) -> bool:
        if call in NEVER_FORCED:
            return False
        if call not in self.forced:
            first = self.rng.randint(2, 10)
            self.forced[call] = {first, first + self.rng.randint(5, 30)}
        self.calls[call] = self.calls.get(call, 0) + 1
        return self.calls[call] in self.forced[call]

    def draw(self, call: str, table: tuple[float, tuple[str, ...]]) -> str | None:
        """The faults of one call go through its kinds in the declared order, in a cycle: the
        first fault of a call is its first kind (the rarest in nature comes first, so that one
        fault of a call is enough for the test to see it), every kind within a cycle. The
        forced faults are the first two of the cycle."""
        rate, kinds = table
        if not self._forced(call) and self.rng.random() >= rate * self.scale:
            return None
        if not self.next_kinds.get(call):
            self.next_kinds[call] = list(reversed(kinds))
        kind = self.next_kinds[call].pop()
        print(
            json.dumps(
                {"message": "fault injected", "call": call, "kind": kind, "pid": os.getpid()}
            ),
            file=sys.stderr,
            flush=True,
        )
        return kind


def kafka_error(kind: str, call: str) -> Any:
    from confluent_kafka import KafkaError, KafkaException

    reason = f"injected {kind} fault in {call}"
    error = {
        "retriable": lambda: KafkaError(KafkaError._TIMED_OUT, reason, retriable=True),
        "unknown_outcome": lambda: KafkaError(KafkaError._TIMED_OUT, reason, retriable=True),
        "non_retriable": lambda: KafkaError(KafkaError._FAIL, reason),
        "abortable": lambda: KafkaError(KafkaError._TIMED_OUT, reason, txn_requires_abort=True),
        "fatal": lambda: KafkaError(KafkaError._FENCED, reason, fatal=True),
    }[kind]()
    return KafkaException(error)


def _faulty(plan: FaultPlan, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if name in plan.pending_success:  # the retry of a call that already did its work
            plan.pending_success.discard(name)
            return None
        kind = plan.draw(name, KAFKA_CALLS[name])
        if kind is None:
            return real(self, *args, **kwargs)
        if kind == "buffer_full":
            raise BufferError(f"injected buffer_full fault in {name}")
        if kind == "unknown_outcome":
            real(self, *args, **kwargs)
            plan.pending_success.add(name)
        raise kafka_error(kind, name)

    return call


def _with_faulty_deliveries(plan: FaultPlan, real: Callable[..., Any]) -> Callable[..., Any]:
    """A produce whose delivery report may say "failed" for a record the broker stored."""

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        callback = kwargs.get("on_delivery") or kwargs.get("callback")
        if callback is not None:

            def report(err: Any, msg: Any) -> None:
                if err is None and plan.draw("delivery", KAFKA_CALLS["delivery"]):
                    from confluent_kafka import KafkaError

                    err = KafkaError(
                        KafkaError._MSG_TIMED_OUT, "injected unknown_outcome delivery report"
                    )
                callback(err, msg)

            kwargs = {**kwargs, ("on_delivery" if "on_delivery" in kwargs else "callback"): report}
        return real(self, *args, **kwargs)

    return call


def install(seed: int, scale: float) -> None:
    """Replace confluent_kafka's Producer and Consumer and influxdb-client's write with faulty
    subclasses/wrappers, for every module that imports them afterwards."""
    import confluent_kafka

    plan = FaultPlan(seed, scale)
    producer_methods = {
        name: _faulty(plan, name, getattr(confluent_kafka.Producer, name))
        for name in (
            "produce",
            "produce_batch",
            "begin_transaction",
            "send_offsets_to_transaction",
            "commit_transaction",
            "abort_transaction",
        )
    }
    for name in ("produce", "produce_batch"):
        producer_methods[name] = _with_faulty_deliveries(plan, producer_methods[name])
    consumer_methods = {
        name: _faulty(plan, name, getattr(confluent_kafka.Consumer, name))
        for name in ("commit", "consume", "poll")
    }
    # replaced for the rest of the process, before the service imports its clients
    faulty_producer = type("FaultyProducer", (confluent_kafka.Producer,), producer_methods)
    faulty_consumer = type("FaultyConsumer", (confluent_kafka.Consumer,), consumer_methods)
    patch.object(confluent_kafka, "Producer", faulty_producer).start()
    patch.object(confluent_kafka, "Consumer", faulty_consumer).start()
    _install_influx(plan)


def _install_influx(plan: FaultPlan) -> None:
    import urllib3
    from influxdb_client.client.write_api import WriteApi
    from influxdb_client.rest import ApiException

    real = WriteApi.write

    def write(self: Any, *args: Any, **kwargs: Any) -> Any:
        kind = plan.draw("influx_write", INFLUX_WRITE)
        if kind == "connection":
            raise urllib3.exceptions.NewConnectionError(
                urllib3.connection.HTTPConnection("injected"), "injected connection fault"
            )
        if kind == "server":
            raise ApiException(status=503, reason="injected server fault")
        result = real(self, *args, **kwargs)
        if kind == "unknown_outcome":
            raise urllib3.exceptions.ReadTimeoutError(
                urllib3.HTTPConnectionPool("injected"),
                "/api/v2/write",
                "injected unknown_outcome fault",
            )
        return result

    patch.object(WriteApi, "write", write).start()


def install_from_environment() -> None:
    """``CLIENT_FAULTS=seed,scale`` (e.g. ``7,1.0``); absent: nothing is installed."""
    spec = os.environ.get("CLIENT_FAULTS", "")
    if not spec:
        return
    seed, _, scale = spec.partition(",")
    install(int(seed) * 1_000_003 + os.getpid(), float(scale or 1.0))
