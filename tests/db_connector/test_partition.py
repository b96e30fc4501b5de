"""The connector partitioned from InfluxDB while the sample arrives: cut both ways, cut after the
write and before the answer, lossy, slow and flapping (tests/support/partition.py). The
connector and InfluxDB stay up and each believes the other gone; afterwards InfluxDB equals the
oracle.

The answer-lost round is the zombie write of this link: InfluxDB has stored the points, the
connector never hears so and writes them again, over and over until the link heals. The test
shows the points there while the connector's offsets are still behind and its retries count
up; the final comparison shows that every late copy landed on the same point with the same
value (a write is idempotent by series and timestamp).
"""

from __future__ import annotations

import math
import os
import random
from pathlib import Path

import pytest

from stacktools.harness.scrape import scrape_metrics
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from tests.support.harness import metric
from tests.support.partition import Endpoint, Network, network
from tests.support.waits import keep_alive, settle

from .test_connector_stack import (
    all_records,
    assert_influx_equals_oracle,
    group_of,
    offsets_behind,
    produce,
    sample_feed,
    start,
    wait_consumed_to_end,
    wait_until_exact,
)

pytestmark = [pytest.mark.stack, pytest.mark.partition]

#: Rounds (one fault each); PARTITION_ROUNDS runs more.
ROUNDS = int(os.environ.get("PARTITION_ROUNDS", "5"))
#: The connector's write timeout and longest back-off here: a fault held for a few of them is
#: met by timed-out writes and retries, not only by a slow answer.
WRITE_TIMEOUT_S, RETRY_MAX_S = 2.0, 1.0
HELD_S = 3 * (WRITE_TIMEOUT_S + RETRY_MAX_S)
#: What a connection of the connector carries before its answers are lost: past the TLS
#: handshake and a ping, within the first write of a chunk.
ANSWERED_BYTES = 4096
FAULTS = ("cut", "answer-lost", "lossy", "slow", "flapping")


def hold(net: Network, fault: str, connector: Endpoint, influx: Endpoint, rng: random.Random):
    """Start ``fault``; a context to hold it for the round."""
    if fault == "cut":
        net.cut(connector, influx)
    elif fault == "answer-lost":
        net.answers_lost(influx, connector, ANSWERED_BYTES)
    elif fault == "lossy":
        net.lossy(connector, influx, 0.3)
        net.lossy(influx, connector, 0.3)
    elif fault == "slow":
        net.slow(connector, influx, 16)
    elif fault == "flapping":
        return net.flapping(connector, influx, rng, (0.2, 2.0))
    return None


def writes_served(settings: Settings) -> tuple[int, int]:
    """InfluxDB's own count of (write requests, points written OK) since it started: what it
    did, whether or not its answer reached anyone."""
    (stats,) = InfluxClient(settings).rows("", "SHOW STATS FOR 'httpd'")
    return stats["writeReq"], stats["pointsWrittenOK"]


def test_the_connector_partitioned_from_influxdb_stays_exact(lane, tmp_path: Path) -> None:
    settings, topics, database = lane
    feed = sample_feed()
    records = all_records(feed)
    seed = int(os.environ.get("PARTITION_SEED", str(random.randrange(1_000_000))))
    rng = random.Random(seed)
    # every kind of fault once, then at random
    faults = [*FAULTS, *(rng.choice(FAULTS) for _ in range(max(0, ROUNDS - len(FAULTS))))]
    faults = faults[:ROUNDS]
    rng.shuffle(faults)
    print(f"PARTITION_SEED={seed} faults={faults}")
    size = math.ceil(len(records) / (len(faults) + 1))
    chunks = [records[i : i + size] for i in range(0, len(records), size)]
    group = group_of(database)
    log = tmp_path / "connector.log"
    with network() as net:
        connector = net.group("connector")
        influx = net.server("influxdb", (settings.influx_port,))
        with connector.joined():
            service = start(
                settings, topics, database, log,
                "--write-timeout", f"{WRITE_TIMEOUT_S}s", "--retry-max", f"{RETRY_MAX_S}s",
            )  # fmt: skip
        port = int(service.args[service.args.index("--metrics-port") + 1])
        assert settle(lambda: scrape_metrics(port), 60, "the connector's /metrics")
        try:
            for fault, chunk in zip(faults, chunks, strict=False):
                before = writes_served(settings)
                retries = metric(port, "connector_write_retries_total")
                flapping = hold(net, fault, connector, influx, rng)
                produce(settings, topics, chunk)
                if fault == "answer-lost":
                    # the zombie write: stored, unacknowledged, written again
                    seen: dict[str, int] = {}

                    def stored_unacknowledged(
                        before: tuple[int, int] = before, retries: float = retries, seen=seen
                    ) -> bool:
                        assert service.alive(), log.read_text()[-3000:]
                        requests, points = writes_served(settings)
                        seen["requests"], seen["points"] = requests - before[0], points - before[1]
                        seen["retries"] = int(
                            metric(port, "connector_write_retries_total") - retries
                        )
                        seen["behind"] = len(offsets_behind(settings, group, topics))
                        return (
                            seen["requests"] >= 2  # the write, and the same write again
                            and seen["points"] > 0
                            and seen["retries"] >= 2
                            and seen["behind"] > 0
                        )

                    # two write timeouts and back-offs after the chunk is consumed
                    assert settle(stored_unacknowledged, 60, "stored, unanswered, retried"), seen
                if flapping is not None:
                    with flapping:
                        keep_alive(service, HELD_S, log)
                else:
                    keep_alive(service, HELD_S, log)
                if fault in ("cut", "answer-lost"):
                    assert net.dropped_packets() > 0, f"{fault}: the connector never wrote"
                    assert offsets_behind(settings, group, topics), "committed across a cut"
                net.heal()
                wait_consumed_to_end(settings, group, topics, 120)
            produce(settings, topics, [r for c in chunks[len(faults) :] for r in c])
            wait_until_exact(settings, database, feed, service, 120)
            wait_consumed_to_end(settings, group, topics, 120)
            assert_influx_equals_oracle(settings, database, feed, topics["dlq"])
        finally:
            assert service.terminate() == 0, log.read_text()[-3000:]
