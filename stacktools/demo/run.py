"""One replay through a running pipeline, watched until every stage has drained: shared by the
demo and the end-to-end benchmark."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stacktools.demo.sampler import Sampler, Samples
from stacktools.demo.simulator_run import SimulatorRun
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.scrape import metric_sum
from stacktools.harness.services import WINDOWED, spark_stages
from streamkit.deadline import Deadline

QUIET_S = 6.0


@dataclass
class Replay:
    samples: Samples
    metrics: dict[str, dict[str, float]]
    elapsed_s: float
    drained: bool
    simulator: (
        dict  # the simulator's own summary: rows_published, rows_rejected, rejected_rows, ...
    )
    simulator_exit: int | None  # its exit code; None if it still ran (the timeout)


def drained(sampler: Sampler, state: dict, published: int) -> bool:
    """Every stage has taken in everything upstream of it, each Spark stage with windows ran a
    batch after its input was complete (the one whose clock closes the last windows), and
    nothing has moved for QUIET_S seconds."""
    m = sampler.metrics
    bridge = m.get("mqtt_bridge", {})
    raw = metric_sum(bridge, "bridge_records_total")
    taken = metric_sum(bridge, "bridge_messages_total")
    spark = spark_stages(sampler.pipeline.stages)
    if not (
        published
        and taken >= published
        and metric_sum(bridge, "bridge_unacked_messages") == 0
        and all(metric_sum(m.get(name, {}), "spark_input_rows_total") >= raw for name in spark)
    ):
        return False
    last_batches = tuple(
        metric_sum(m.get(name, {}), "spark_last_batch_id") for name in spark if name in WINDOWED
    )
    state.setdefault("input_complete_batches", last_batches)
    previous = state["input_complete_batches"]
    if any(now <= then for now, then in zip(last_batches, previous, strict=False)):
        return False
    snapshot = tuple(sampler.samples.latest(name) for name in sampler.samples.counters)
    if snapshot != state.get("snapshot"):
        state["snapshot"], state["since"] = snapshot, time.monotonic()
    return time.monotonic() - state["since"] >= QUIET_S


def replay_until_drained(
    pipeline: Pipeline, events: Path, replay_args: list[str], timeout_s: float
) -> Replay:
    """Start the simulator on `events` and sample every stage until all have drained (or the
    timeout); a stage that dies is an error, not a wait. A simulator that fails (exits non-zero,
    or publishes nothing) ends the wait at once: there is nothing to drain."""
    sampler = Sampler(pipeline)
    sampler.sample(0.0)  # where every stage stands before the first row: rates start from here
    started = time.monotonic()
    # The simulator keeps /metrics up for two samples after it is done, so even a replay shorter
    # than the sampling interval shows in the samples when it happened, not at the very end.
    simulator = SimulatorRun(
        pipeline.replay(events, *replay_args, "--linger", f"{2 * sampler.every_s + 1}s")
    )
    sampler.start(started)
    state: dict = {}
    try:
        done = watch(
            simulator,
            lambda: check_stages(pipeline),
            lambda: drained(sampler, state, simulator.published),
            Deadline(timeout_s),
        )
    finally:
        sampler.stop()
    elapsed = time.monotonic() - started
    sampler.sample(elapsed)
    simulator.finished()
    published = sampler.samples.counters["simulator rows"]
    published[-1] = max(published[-1], simulator.published)
    return Replay(
        sampler.samples,
        sampler.metrics,
        elapsed,
        done,
        simulator.summary or {},
        simulator.exit_code(),
    )


def check_stages(pipeline: Pipeline) -> None:
    for name in pipeline.stages:
        if not pipeline.services[name].alive():
            raise RuntimeError(f"{name} stopped: see {pipeline.log(name)}")


def watch(
    simulator: SimulatorRun,
    check_stages: Callable[[], None],
    drained: Callable[[], bool],
    deadline: Deadline,
    tick_s: float = 1.0,
) -> bool:
    """Until the pipeline has drained what the simulator published (True), the simulator failed
    or the deadline passed (False). Says once how the simulator ended, when it does."""
    said = False
    while not deadline.expired():
        check_stages()
        if simulator.finished():
            if not said:
                print(f"[demo] {simulator.describe()}", flush=True)
                said = True
            if simulator.failed():
                return False
            if drained():
                return True
        # returns at once when the simulator exits
        simulator.wait(min(tick_s, deadline.remaining()))
    return False
