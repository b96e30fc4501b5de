"""InfluxDB's cardinality limits under a machine that sends a new quantity name in every
message: the series stay bounded, and every point past the limit becomes a dead letter
`influx_series_limit`, exactly once, while every other point is written.

A private InfluxDB rendered by the launcher with ``INFLUX_MAX_TAG_VALUES`` small (the setting
becomes its ``max-values-per-tag``), and the real connector writing to it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring, private_database, private_topic
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.wire import dead_letters
from tests.support.aggregates import produce_measurements
from tests.support.full_disk import copy_stack_secrets, private_server
from tests.support.harness import metric
from tests.support.messages import header_of
from tests.support.ports import free_ports
from tests.support.spark import read_to_end

from .test_connector_stack import group_of, wait_consumed_to_end

pytestmark = pytest.mark.stack
#: The quantity tag's values the measurement may have.
LIMIT = 5
#: Names the flooding machine sends, one new name a message after the first ones.
NAMES = [f"q{n:02d}" for n in range(LIMIT + 4)]
ROUNDS = 3


@pytest.fixture
def limited_influx(stack_settings: Settings, tmp_path: Path) -> Iterator[Settings]:
    """An InfluxDB of its own whose measurements may have ``LIMIT`` values of a tag."""
    run = tmp_path / "run"
    run.mkdir()
    copy_stack_secrets(stack_settings, run)
    limited = {"INFLUX_PORT": free_ports(1)[0], "INFLUX_MAX_TAG_VALUES": LIMIT}
    with private_server(stack_settings, run, "influxdb", limited) as settings:
        yield settings


def test_a_name_flood_is_bounded_by_the_limit_and_its_points_are_dead_letters(
    stack_settings: Settings, limited_influx: Settings, tmp_path: Path
) -> None:
    settings = limited_influx
    topics = {
        kind: private_topic(stack_settings, kind, 2)
        for kind in ("raw", "joined", "aggregates", "late", "dlq")
    }
    database = private_database(settings)
    now_s = int(time.time()) - 600  # within the raw points' retention policy
    records = [
        ("Flood", name, (now_s + round_ * len(NAMES) + n) * 1000, float(n), f"r{round_}.{n}")
        for round_ in range(ROUNDS)
        for n, name in enumerate(NAMES)
    ]
    records += [("Steady", NAMES[0], (now_s + n) * 1000, 1.0, f"s{n}") for n in range(ROUNDS)]
    # InfluxDB judges a write by the values the tag had before it: the first names are written
    # first, and the flood after them
    first = [r for r in records if r[1] in NAMES[:LIMIT]]
    log = tmp_path / "connector.log"
    service = service_process(
        "db_connector",
        Wiring.for_connector(topics, group_of(database), database),
        log,
        env={"INFLUX_PORT": str(settings.influx_port)},
    ).start()
    port = int(service.args[service.args.index("--metrics-port") + 1])
    try:
        produce_measurements(stack_settings, topics["raw"], first[: len(first) // 2], 2)
        wait_consumed_to_end(stack_settings, group_of(database), topics, 120)
        produce_measurements(
            stack_settings, topics["raw"], [r for r in records if r not in first], 2
        )
        produce_measurements(stack_settings, topics["raw"], first[len(first) // 2 :], 2)
        wait_consumed_to_end(stack_settings, group_of(database), topics, 120)
        rows = InfluxClient(settings).rows(database, 'SELECT value, quantity FROM "raw"."raw"')
        written = Counter(row["quantity"] for row in rows)
        refused = Counter(
            (header_of(m, dead_letters.REASON).decode(), header_of(m, "source").decode())
            for m in read_to_end(stack_settings, topics["dlq"])
        )
        flood = len(NAMES) - LIMIT
        assert written == {
            **{name: ROUNDS for name in NAMES[:LIMIT]},
            NAMES[0]: 2 * ROUNDS,  # the steady machine's points of a name already kept
        }, written
        assert refused == {(dead_letters.INFLUX_SERIES_LIMIT, topics["raw"]): flood * ROUNDS}
        assert metric(port, "connector_dead_letters_total") == flood * ROUNDS
        tags = InfluxClient(settings).rows(
            database, 'SHOW TAG VALUES FROM "raw"."raw" WITH KEY = "quantity"'
        )
        assert len(tags) == LIMIT, tags
    finally:
        assert service.terminate() == 0, log.read_text()[-3000:]
