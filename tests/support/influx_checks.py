"""Small InfluxDB checks of the end-to-end tests (the point-by-point comparison with the oracle
is tests/support/judge.py)."""

from __future__ import annotations

from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.wire.retention import source

#: Key of the undecodable records a test writes into the late topic on purpose, so the
#: connector dead-letters them (in its transactional path); they make no point.
POISON_KEY = b"poison-for-the-connector"


def point_count(settings: Settings, database: str, measurement: str) -> int:
    rows = InfluxClient(settings).rows(database, f"SELECT count(*) FROM {source(measurement)}")
    return max((v for r in rows for k, v in r.items() if k.startswith("count_")), default=0)
