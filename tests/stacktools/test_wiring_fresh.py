"""A run's own wiring on the real stack: made whole by ``fresh``, gone after ``discard`` (a long
benchmark must not leave its topics on the stack's disk)."""

from __future__ import annotations

import pytest

from stacktools.harness.wiring import Wiring
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.kafka_clients import admin_client

pytestmark = pytest.mark.stack


def test_a_fresh_wiring_is_discarded_whole(stack_settings: Settings) -> None:
    wiring = Wiring.fresh(stack_settings, "discard")
    made = {*wiring.connector_topics.values(), wiring.markers}
    assert len(made) == 8 and all("discard-" in name for name in made)  # every declared topic

    def topics() -> set[str]:
        return set(admin_client(stack_settings).list_topics(timeout=30).topics)

    def databases() -> set[str]:
        rows = InfluxClient(stack_settings).rows("", "SHOW DATABASES")
        return {row["name"] for row in rows}

    assert made <= topics() and wiring.database in databases()
    wiring.discard(stack_settings)
    assert not made & topics()
    assert wiring.database not in databases()
