"""What the stack tests check the services' output with: the records a file of events must
become, and waits for a topic to hold given keys."""

from __future__ import annotations

import collections
from pathlib import Path

from confluent_kafka import Message

from stacktools.harness.processes import ServiceProcess
from stacktools.harness.scrape import metric_sum, scrape_metrics
from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring
from stacktools.stack.settings import Settings
from streamkit.deadline import TimedOut, wait_until
from streamkit.events import Row, parse_row
from streamkit.events_source import SourceStats, read_rows, sorted_rows
from streamkit.kafka_io import read_to_end
from streamkit.wire import record_key
from tests.support.messages import key_of, value_of


def quick_single_pass_args() -> dict[str, list[str]]:
    """The single pass and the connector made quick for a sample-sized replay (two shuffle
    partitions, a short session gap, frequent flushes): a Pipeline's ``extra_args``."""
    return {
        "spark_single_pass": ["--shuffle-partitions", "2", "--session-gap", "500ms"],
        "db_connector": ["--flush-interval", "500ms"],
    }


def expected_records(events: Path) -> dict[bytes, float]:
    """The raw topic's records a file of events must become: {raw key: value}."""
    expected = {}
    with events.open("rb") as handle:
        for line in handle:
            if line.strip():
                row = parse_row(line)
                for quantity, value in row.quantities.items():
                    expected[record_key(row.thing, quantity, row.timestamp_ms)] = value
    return expected


def wait_for_keys(settings: Settings, topic: str, keys: set[bytes], timeout_s: float) -> set[bytes]:
    """Until every key is in the topic (end offsets alone mislead when re-sends are expected);
    the keys seen."""
    seen: set[bytes] = set()

    def complete() -> bool:
        seen.clear()
        seen.update(key_of(m) for m in read_to_end(settings, topic))
        return keys <= seen

    try:
        wait_until(complete, timeout_s, f"{len(keys)} keys in {topic}", interval_s=2)
    except TimedOut:
        pass
    return seen


def group_by_key(records: list[Message]) -> dict[bytes, list[bytes]]:
    grouped: dict[bytes, list[bytes]] = collections.defaultdict(list)
    for message in records:
        grouped[key_of(message)].append(value_of(message))
    return grouped


def metric(port: int, name: str) -> float:
    """One metric of a service that must be up (summed over its label sets)."""
    values = scrape_metrics(port)
    assert values, f"no /metrics on port {port}"
    return metric_sum(values, name)


def start_bridge(lane: Wiring, log: Path, *extra: str) -> ServiceProcess:
    """Started and subscribed: a first-ever session only keeps what is published after that."""
    service = service_process("mqtt_bridge", lane, log, *extra).start()
    service.wait_logged('"bridge running"', 60)
    return service


def bridge_rows(events: Path) -> list[Row]:
    """The file's rows as the simulator replays them by default (event-time order) and the bridge
    parses them: input for job tests that write the raw topic as the bridge would."""
    return [parse_row(row.payload) for row in sorted_rows(read_rows(events, SourceStats()))]
