"""Benchmark: the streaming join job with exactly-once output (a script, not a test).

    .venv/bin/python benchmarks/bench_join.py [--rows 100000] [--batch-sizes 10000,50000,200000]

Generates a file, writes its measurements to a private raw topic the way the bridge does, then
for each batch size runs `python -m spark_jobs.join --available-now` (fresh checkpoint, private
output topics) and reports, from the job's own per-batch progress log: sustained input
records/s and joins/s over the processing time (Spark start-up excluded), batch latency p50/p99,
and the peak RSS of the driver (Python), its JVM and the Python workers. The baseline is the
library's batch path run on the same records in this process (no Spark, no Kafka): what the
join itself costs, so the ratio shows what the streaming machinery adds.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path


from mqtt_bridge.records import RowSplitter
from simulator.generate import generate
from spark_jobs.config import JoinSettings
from spark_jobs.join import join_config
from lsb import LocalStreamBuffer
from streamkit.config import Settings
from streamkit.events import validate
from stacktools.processes import ServiceProcess, free_port
from stacktools.wiring import private_topic
from streamkit.kafka_io import read_to_end
from streamkit.kafka_clients import idempotent_producer
from stacktools.stack import Stack

PAIRS = "actSpeed_C11:vaTorque_C11:mechanical_power"


def feed(settings: Settings, raw: str, rows: int) -> tuple[int, dict[str, list]]:
    """Generated rows -> raw topic (bridge encoding and partitioning); returns the record count
    and the joined quantities per thing for the in-process baseline."""
    splitter = RowSplitter(4)
    producer = idempotent_producer(settings, "bench-feed", **{"queue.buffering.max.messages": 2_000_000})
    count = 0
    streams: dict[str, list] = {}
    wanted = set(join_config(JoinSettings.from_sources(cli={"pairs": PAIRS})).quantities)
    for obj in generate(rows, 8, seed=3):
        row = validate(obj)
        for record in splitter.split(row):
            producer.produce(raw, record.value, record.key, partition=record.partition)
            count += 1
        producer.poll(0)
        entry = streams.setdefault(row.thing, [])
        entry.extend((q, row.timestamp_ms, v) for q, v in row.quantities.items() if q in wanted)
    producer.flush(120)
    return count, streams


def baseline_joins_per_s(streams: dict[str, list]) -> tuple[int, float]:
    import numpy as np

    config = join_config(JoinSettings.from_sources(cli={"pairs": PAIRS}))
    buffer = LocalStreamBuffer(config)
    started = time.perf_counter()
    pairs = 0
    for thing, records in streams.items():
        quantities = np.array([r[0] for r in records], dtype=object)
        times = np.array([r[1] for r in records], dtype=np.int64)
        values = np.array([r[2] for r in records], dtype=np.float64)
        pairs += len(buffer.push_batch(thing, quantities, times, values).pairs)
    return pairs, pairs / (time.perf_counter() - started)


def group_rss_mb(pgid: int) -> dict[str, float]:
    """Current RSS per role of every process in the job's process group."""
    out: dict[str, float] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != pgid:
                continue
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            rss_kb = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                          if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            continue
        role = "jvm" if cmd[0].endswith(b"java") else "driver" if b"spark_jobs.join" in b" ".join(cmd) else "python workers"
        out[role] = out.get(role, 0.0) + rss_kb / 1024
    return out


def run_job(settings: Settings, raw: str, batch: int, work: Path) -> dict:
    joined, late, markers = (private_topic(settings, "joined", 4), private_topic(settings, "late", 4),
                             private_topic(settings, "markers", 1, compact=True))
    log = work / f"join-{batch}.log"
    args = ["--raw-topic", raw, "--joined-topic", joined, "--late-topic", late, "--marker-topic", markers,
            "--checkpoint-dir", str(work / f"checkpoint-{batch}"), "--query-name", f"bench-{uuid.uuid4().hex[:6]}",
            "--pairs", PAIRS, "--max-offsets-per-trigger", str(batch), "--available-now",
            "--metrics-port", str(free_port())]
    job = ServiceProcess("spark_jobs.join", args, log).start()
    peak: dict[str, float] = {}
    while job.process.poll() is None:
        for role, mb in group_rss_mb(job.process.pid).items():
            peak[role] = max(peak.get(role, 0.0), mb)
        time.sleep(0.5)
    if job.process.returncode != 0:
        raise SystemExit(f"join job failed, see {log}")
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    progress = [e for e in events if e.get("msg") == "batch progress" and e.get("input_rows")]
    durations = sorted(e["duration_ms"] / 1000 for e in progress)
    processing_s = sum(durations)
    inputs = sum(e["input_rows"] for e in progress)
    # Sustained: without the first batch, which pays the JVM's and the Python workers' warm-up
    # once per start (~10 s here) and would otherwise dominate a short run.
    warm = progress[1:] or progress
    warm_rate = sum(e["input_rows"] for e in warm) / (sum(e["duration_ms"] for e in warm) / 1000)
    joins = len(read_to_end(settings, joined))  # end offsets would also count transaction markers
    return {"batch": batch, "batches": len(progress), "input_records": inputs, "processing_s": processing_s,
            "records_per_s": inputs / processing_s, "warm_records_per_s": warm_rate,
            "warm_joins_per_s": warm_rate * joins / inputs, "joins": joins, "joins_per_s": joins / processing_s,
            "p50_s": statistics.median(durations), "p99_s": durations[min(len(durations) - 1, int(len(durations) * 0.99))],
            "rss_mb": peak}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch-sizes", default="10000,50000,200000")
    parser.add_argument("--work-dir", type=Path, help="keep checkpoints and job logs here (default: a temp dir)")
    args = parser.parse_args()
    settings = Stack(Settings.from_sources()).up()
    raw = private_topic(settings, "raw", 4)
    print(f"feeding {args.rows:,} generated rows into {raw} ...", flush=True)
    records, streams = feed(settings, raw, args.rows)
    base_pairs, base_rate = baseline_joins_per_s(streams)
    print(f"{records:,} raw records; in-process batch path: {base_pairs:,} pairs at {base_rate:,.0f} joins/s", flush=True)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-join-") as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            print(f"join job, maxOffsetsPerTrigger={batch:,} ...", flush=True)
            results.append(run_job(settings, raw, batch, work))
            r = results[-1]
            print(f"  {r['batches']} batches, {r['records_per_s']:,.0f} records/s ({r['warm_records_per_s']:,.0f} "
                  f"after the first batch), {r['joins_per_s']:,.0f} joins/s", flush=True)
    print()
    print(f"{'batch size':>10} {'batches':>8} {'records/s':>10} {'warm rec/s':>10} {'warm joins/s':>12} "
          f"{'p50 s':>6} {'p99 s':>6} "
          f"{'driver MB':>9} {'JVM MB':>7} {'workers MB':>10} {'vs batch path':>13}")
    for r in results:
        rss = r["rss_mb"]
        print(f"{r['batch']:>10,} {r['batches']:>8} {r['records_per_s']:>10,.0f} {r['warm_records_per_s']:>10,.0f} "
              f"{r['warm_joins_per_s']:>12,.0f} "
              f"{r['p50_s']:>6.2f} {r['p99_s']:>6.2f} {rss.get('driver', 0):>9,.0f} {rss.get('jvm', 0):>7,.0f} "
              f"{rss.get('python workers', 0):>10,.0f} {r['joins_per_s'] / base_rate:>12.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
