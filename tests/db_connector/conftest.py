"""The connector's stack tests' lane: private topics of every kind and a private database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stacktools.harness.wiring import private_database, private_topic
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings

from .test_connector_stack import write_conflict_seed


@pytest.fixture
def lane(stack_settings: Settings) -> Iterator[tuple[Settings, dict[str, str], str]]:
    topics = {
        kind: private_topic(stack_settings, kind, 2)
        for kind in ("raw", "joined", "aggregates", "late", "dlq")
    }
    database = private_database(stack_settings)
    write_conflict_seed(stack_settings, database)
    yield stack_settings, topics, database
    InfluxClient(stack_settings).drop_database(database)
