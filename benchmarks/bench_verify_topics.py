"""How long `python -m stacktools.verify --topics` takes on the full-size events file.

Without a pipeline run: the records an exact run leaves on the output topics (every raw record,
pair, closed window and late record of the file's expectation) are written into scratch copies
of the declared topics on the running local stack, then verify is timed against them as a
subprocess (interpreter start included), and its verdict must be "exact". The file is the cached
full-size one (benchmarks/bench_e2e.py's). Prints the rows, records and the phases' seconds;
the scratch topics are deleted afterwards unless --keep.

    .venv/bin/python benchmarks/bench_verify_topics.py [--rows N] [--keep] [--reuse RUN]
"""

from __future__ import annotations

import dataclasses
import sys
import time
import uuid

from benchmarks.support.events import events_file
from benchmarks.support.verify_timing import bench_parser, timed_verify
from spark_jobs.config import SinglePassSettings
from stacktools.stack.settings import Settings
from stacktools.stack.topics import load_topic_specs, provision
from stacktools.verify.events import read_records
from stacktools.verify.expect import Expectation, expectation
from stacktools.verify.rules import rules_of
from streamkit.kafka_clients import admin_client, idempotent_producer, produce_retrying
from streamkit.wire import AvroCodec, thing_partition
from tests.support.verify_records import (
    DECLARED,
    SCHEMAS,
    aggregate_fields,
    joined_fields,
    key_of,
    late_fields,
    raw_fields,
)


def load(settings: Settings, run: str, expected: Expectation) -> int:
    """The expectation's records into ``<topic>.<run>``, partitioned by Thing like the stages
    (one idempotent producer: read_committed reads records written outside transactions)."""
    declared = {s.name: s for s in load_topic_specs(settings)}
    specs = [dataclasses.replace(declared[n], name=f"{n}.{run}") for n in DECLARED.values()]
    provision(settings, specs)
    frames = expected.frames
    items = {
        "raw": raw_fields(frames["raw"]),
        "joined": joined_fields(frames["joined"]),
        "aggregates": aggregate_fields(frames["aggregate"][~frames["aggregate"]["pending"]]),
        "late": late_fields(
            expected.late_records if expected.late_records is not None else frames["late"]
        ),
    }
    producer = idempotent_producer(settings, f"verify-bench-{run}")
    partitions = settings.topic_partitions
    written = 0
    for kind, fields in items.items():
        codec, topic = AvroCodec(SCHEMAS[kind]), f"{DECLARED[kind]}.{run}"
        for f in fields:
            produce_retrying(
                producer,
                topic,
                codec.encode(f),
                key_of(kind, f),
                partition=thing_partition(f["thing"], partitions),
            )
            written += 1
            if written % 100_000 == 0:
                producer.poll(0)
    if producer.flush(300):
        raise RuntimeError("records left unsent")
    return written


def main() -> int:
    args = bench_parser(__doc__ or "", "topics").parse_args()
    settings = Settings.from_sources()
    events = args.events or events_file(args.rows, args.things)
    rules = rules_of(SinglePassSettings.from_sources())
    started = time.perf_counter()
    expected = expectation(read_records(events), rules)
    print(f"expectation in-process: {time.perf_counter() - started:.1f} s", flush=True)
    run = args.reuse or f"verify-bench-{uuid.uuid4().hex[:6]}"
    records = 0
    if not args.reuse:
        started = time.perf_counter()
        records = load(settings, run, expected)
        print(f"wrote {records:,} records to *.{run} in {time.perf_counter() - started:.0f} s")
    try:
        code, wall, cpu, result = timed_verify(events, ["--topics", run])
        print(
            f"verify --topics: rows={result.get('rows', 0):,} records={result.get('records', 0):,}"
            f" written={records:,} exit={code} wall={wall:.1f}s "
            f"cpu={cpu:.1f}s (verify's own; the broker's not counted) "
            f"phases={result.get('seconds')}"
        )
        return 0 if code == 0 else 1
    finally:
        if not (args.keep or args.reuse):
            admin = admin_client(settings)
            for future in admin.delete_topics([f"{n}.{run}" for n in DECLARED.values()]).values():
                future.result()


if __name__ == "__main__":
    sys.exit(main())
