"""The tables benchmarks/bench_e2e.py prints once every run is done: the full replays' (with their
CPU per raw record and the on/off ratios of a switch), the fixed rates' latency and the steady
states'."""

from __future__ import annotations

from typing import Any

from benchmarks.support.e2e_steady import Steady


def fmt(value: float | None) -> str:
    """A seconds figure of a table, or n/a where the run observed none."""
    return "n/a" if value is None else f"{value:.2f}"


def print_steady(results: list[Steady], warmup_s: float, measure_s: float) -> None:
    print(
        f"\nSteady state: percentiles of the {measure_s:.0f} s after a {warmup_s:.0f} s warm-up; "
        "start: stages started, and every stage ready (its ready line; Spark's: query running), "
        "-> first joined point acknowledged by InfluxDB. Joined: from the "
        "pair's event time, its later input's (live: its publish), the moment the pair's partner "
        "exists -> InfluxDB ack; of it, the data's own wait: from there to the arrival of the "
        "record that makes the pair certain (docs/join.md; a model of the replayed feed, not a "
        "measurement).\n"
    )
    print(
        "| shape | rows/s | achieved | first joined point s | of it after ready s | raw p50 s "
        "| raw p99 s | joined p50 s | joined p99 s | of it the data's wait p50 s | p99 s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        (raw50, raw99), (joined50, joined99) = r.latency["raw"], r.latency["joined"]
        wait50, wait99 = r.data_wait
        print(
            f"| {r.shape} | {r.rate:,} | {r.achieved_rows_per_s:,.0f} | {fmt(r.first_joined_s)} | "
            f"{fmt(r.ready_joined_s)} | {fmt(raw50)} | {fmt(raw99)} | {fmt(joined50)} | "
            f"{fmt(joined99)} | {fmt(wait50)} | {fmt(wait99)} |"
        )
    print(
        "\nAggregates: from when the data made the window closable (closed_at_ms: the event time "
        "of the record that moved its key's horizon past the window's end) -> InfluxDB ack; a "
        "window the idle timeout closed from its end.\n"
    )
    print("| shape | rows/s | aggregate (after the window could close) p50 s | p99 s |")
    print("|---|---:|---:|---:|")
    for r in results:
        agg50, agg99 = r.latency["aggregate"]
        print(f"| {r.shape} | {r.rate:,} | {fmt(agg50)} | {fmt(agg99)} |")
    names = sorted({name for r in results for name in r.cpu_us_per_record})
    print(
        "\nCPU per raw record in the window (µs; stages: their whole process group, Spark's JVM "
        "and Python workers included; servers: their process):\n"
    )
    print("| shape | rows/s | " + " | ".join(names) + " | total |")
    print("|---|---:|" + "---:|" * (len(names) + 1))
    for r in results:
        print(
            f"| {r.shape} | {r.rate:,} | "
            + " | ".join(f"{r.cpu_us_per_record.get(n, 0.0):.1f}" for n in names)
            + f" | {sum(r.cpu_us_per_record.values()):.1f} |"
        )


def print_ratio(rows_table: list[tuple[Any, ...]], switch: str) -> None:
    """``switch`` (a label part: "TLS", "statistics") on against off, per run otherwise alike:
    time to drained and CPU per raw record."""
    by_label = {row[0]: row for row in rows_table}
    on_part, off_part = f", {switch} on", f", {switch} off"
    for label, row in by_label.items():
        off = by_label.get(label.replace(on_part, off_part)) if on_part in label else None
        if off is None:
            continue
        cpu_on, cpu_off = sum(row[-1].values()), sum(off[-1].values())
        print(
            f"\n{switch} on / off, {label.replace(on_part, '')}: time to drained "
            f"{row[2]:,.0f} s / {off[2]:,.0f} s = {row[2] / off[2]:.2f}x; CPU per raw record "
            f"{cpu_on:.1f} / {cpu_off:.1f} µs = {cpu_on / cpu_off:.3f}x "
            f"({100 * (cpu_on / cpu_off - 1):+.1f} %)"
        )


def print_full(rows_table: list[tuple[Any, ...]]) -> None:
    """The full replays' table, their CPU per raw record, and the on/off ratios."""
    print("| shape | rows | seconds to drained | rows/s | drained | peak per stage (10 s, per s) |")
    print("|---|---:|---:|---:|---|---|")
    for shape, rows, seconds, per_s, drained, peaks, _ in rows_table:
        print(
            f"| {shape} | {rows:,} | {seconds:,.0f} | {per_s:,.0f} | {drained} | "
            + ", ".join(f"{k} {v:,}" for k, v in peaks.items())
            + " |"
        )
    names = sorted({name for *_, cpu in rows_table for name in cpu})
    print(
        "\nCPU per raw record from the replay's start to drained (µs; the simulator left out: "
        "it has exited):"
    )
    print("\n| shape | " + " | ".join(names) + " | total |")
    print("|---|" + "---:|" * (len(names) + 1))
    for shape, *_, cpu in rows_table:
        print(
            f"| {shape} | "
            + " | ".join(f"{cpu.get(n, 0.0):.1f}" for n in names)
            + f" | {sum(cpu.values()):.1f} |"
        )
    print_ratio(rows_table, "TLS")
    print_ratio(rows_table, "statistics")


def print_rates(rate_table: list[tuple[Any, ...]]) -> None:
    """The fixed-rate runs' latency table."""
    print(
        "\n| shape | target rows/s | achieved rows/s | raw p50 s | raw p99 s | joined p50 s | "
        "joined p99 s | drained | drained s after the last row |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for shape, rate, achieved, raw50, raw99, joined50, joined99, drained, tail in rate_table:
        print(
            f"| {shape} | {rate:,} | {achieved:,.0f} | {fmt(raw50)} | {fmt(raw99)} | "
            f"{fmt(joined50)} | {fmt(joined99)} | {drained} | {tail:.1f} |"
        )
    print(
        "\nLatency: event time (live: the wall clock at publish) -> InfluxDB acknowledged the "
        "point, from the connector's connector_event_latency_seconds histogram "
        "(bucket-interpolated)."
    )
