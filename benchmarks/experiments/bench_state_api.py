"""Verdict: the jobs keep applyInPandasWithState; transformWithStateInPandas is no faster.

Benchmark: the join under applyInPandasWithState vs transformWithStateInPandas (a script).

    .venv/bin/python benchmarks/experiments/bench_state_api.py [--rows 400000]
        [--batch-sizes 50000,200000] [--rounds 2]

Issue 5 asks to choose the stateful operator by measurement. Both variants run the job's own
per-thing function (``spark_jobs.passes.join_function``: the join operator through the Spark
adapter, one binary state value per thing, RocksDB state store) on the same generated raw
topic, and the job's Kafka record encoding; only the operator differs. Each run is its own
process (no JVM warmed by the other variant), variants alternate, and the rate excludes the
first (warm-up) batch. The sink collects the batch as Arrow, as the exactly-once sink does,
without producing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from benchmarks.support.raw_feed import feed
from benchmarks.support.spark_run import PAIRS
from stacktools.harness.wiring import private_topic
from stacktools.stack import Stack
from stacktools.stack.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.streaming.listener import StreamingQueryProgress

    from spark_jobs.config import JoinSettings
    from spark_jobs.stateful import OperatorFunction

VARIANTS = ("applyInPandasWithState", "transformWithStateInPandas")


def run_variant(variant: str, raw: str, batch: int) -> dict:
    """In a child process: one --available-now run of the join with the given operator."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    from spark_jobs.config import JoinSettings
    from spark_jobs.passes import join_function, join_plan, joined_quantities
    from spark_jobs.session import ROCKSDB_STATE_STORE, build_session
    from spark_jobs.source import read_measurements
    from spark_jobs.stateful import MEASUREMENT_COLUMNS, STATE_SCHEMA

    settings = JoinSettings.from_sources(
        cli={
            "pairs": PAIRS,
            "raw_topic": raw,
            "max_offsets_per_trigger": batch,
            "starting_offsets": "earliest",
        }
    )
    spark = build_session(f"bench-{variant}", extra=ROCKSDB_STATE_STORE)
    plan = join_plan(settings)
    joiner = join_function(plan)
    measurements = read_measurements(spark, settings)
    grouped = (
        measurements.where(joined_quantities(measurements.quantity, plan))
        .select(*MEASUREMENT_COLUMNS)
        .groupBy("thing")
    )
    if variant == "applyInPandasWithState":
        rows = grouped.applyInPandasWithState(
            joiner, joiner.output_schema, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
        )
    else:
        rows = grouped.transformWithStateInPandas(
            join_processor(joiner), joiner.output_schema, "Append", "None"
        )
    progress, output = collect_available_now(rows, settings)
    warm = progress[1:] or progress
    seconds = sum(p["durationMs"]["triggerExecution"] for p in warm) / 1000
    return {
        "variant": variant,
        "batch": batch,
        "batches": len(progress),
        "output_rows": output,
        "first_batch_s": progress[0]["durationMs"]["triggerExecution"] / 1000,
        "warm_records_per_s": sum(p["numInputRows"] for p in warm) / seconds,
    }


def join_processor(joiner: OperatorFunction) -> StatefulProcessor:
    """The join's own function behind transformWithStateInPandas, so that only the operator
    differs between the variants."""
    import pandas as pd
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.streaming.stateful_processor import (
        StatefulProcessorHandle,
        TimerValues,
        ValueState,
    )

    from spark_jobs.stateful import STATE_SCHEMA

    class ValueStateAsGroupState:
        """The adapter speaks applyInPandasWithState's GroupState; this adapts a ValueState
        (the join has no timers)."""

        hasTimedOut = False

        def __init__(self, value_state: ValueState) -> None:
            self.value_state = value_state

        @staticmethod
        def getCurrentProcessingTimeMs() -> int:
            return int(time.time() * 1000)

        @property
        def exists(self) -> bool:
            return self.value_state.exists()

        @property
        def get(self) -> tuple | None:
            return self.value_state.get()

        def update(self, value: tuple) -> None:
            self.value_state.update(value)

    class JoinProcessor(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.state = ValueStateAsGroupState(handle.getValueState("state", STATE_SCHEMA))

        def handleInputRows(
            self, key: tuple, rows: Iterator[pd.DataFrame], timerValues: TimerValues
        ) -> Iterator[pd.DataFrame]:
            yield from joiner(key, rows, self.state)

        def close(self) -> None:
            pass

    return JoinProcessor()


def collect_available_now(
    rows: DataFrame, settings: JoinSettings
) -> tuple[list[StreamingQueryProgress], int]:
    """Runs the query over what the topic holds, collecting each batch as Arrow as the
    exactly-once sink does but producing nothing, so the sink's cost is alike and small: the
    progress of the batches that read records, and the output rows."""
    from spark_jobs.join import to_kafka_records

    output = 0

    def collect(frame: DataFrame, _batch_id: int) -> None:
        nonlocal output
        output += frame.toArrow().num_rows

    with tempfile.TemporaryDirectory(prefix="bench-state-") as checkpoint:
        partitions = {
            settings.joined_topic: 2,
            settings.late_topic: 2,
        }  # only collected, never produced
        query = (
            to_kafka_records(rows, settings, partitions)
            .writeStream.option("checkpointLocation", checkpoint)
            .foreachBatch(collect)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        progress = [p for p in query.recentProgress if p["numInputRows"]]
    return progress, output


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--batch-sizes", default="50000,200000")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each variant per batch size")
    parser.add_argument(
        "--child", nargs=3, metavar=("VARIANT", "TOPIC", "BATCH"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        variant, raw, batch = args.child
        print(json.dumps(run_variant(variant, raw, int(batch))))
        return 0
    settings = Stack(Settings.from_sources()).up()
    raw = private_topic(settings, "raw", 4)
    print(f"feeding {args.rows:,} generated rows into {raw} ...", flush=True)
    records, _ = feed(settings, raw, args.rows)
    print(f"{records:,} raw records", flush=True)
    results: dict[tuple[str, int], list[dict]] = {}
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        for round_ in range(args.rounds):
            for variant in VARIANTS:
                child = subprocess.run(
                    [sys.executable, __file__, "--child", variant, raw, str(batch)],
                    capture_output=True,
                    text=True,
                    env={**os.environ},
                    check=False,
                )
                if child.returncode != 0:
                    sys.stderr.write(child.stderr[-4000:])
                    raise SystemExit(f"{variant} run failed")
                result = json.loads(child.stdout.strip().splitlines()[-1])
                results.setdefault((variant, batch), []).append(result)
                print(
                    f"  batch {batch:,} round {round_ + 1} {variant}: "
                    f"{result['warm_records_per_s']:,.0f} records/s after the first batch "
                    f"({result['batches']} batches, {result['output_rows']:,} output rows)",
                    flush=True,
                )
    print(
        f"\n{'operator':<28} {'batch size':>10} {'records/s (mean of rounds)':>27} "
        f"{'first batch s':>14}"
    )
    for (variant, batch), runs in results.items():
        mean = sum(r["warm_records_per_s"] for r in runs) / len(runs)
        first = sum(r["first_batch_s"] for r in runs) / len(runs)
        print(f"{variant:<28} {batch:>10,} {mean:>27,.0f} {first:>14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
