"""Why an operator hands a record back instead of using it: one vocabulary for every operator.

The strings are what the late topic's ``reason`` field, the InfluxDB ``late`` measurement's
``reason`` tag and the dashboards carry, so they are part of the output contract: the join and
the windows use the same word for the same thing.
"""

from __future__ import annotations

#: Not newer than what its key's watermark already passed (the join: its stream's last accepted
#: record; the windows: the key's horizon, clock minus the allowed lateness).
BEHIND_WATERMARK = "behind_watermark"
#: In a window an idle flush already emitted (the windows).
WINDOW_CLOSED = "window_closed"
#: An identical copy of a record still held.
DUPLICATE = "duplicate"
#: A held copy replaced by a later, different copy of the same record (the last copy wins).
SUPERSEDED = "superseded"
#: Stamped further ahead of the processing clock than allowed: a bad clock moves no key's time.
FUTURE_TIMESTAMP = "future_timestamp"
#: Behind the watermark its pair inherits from a partner that went ahead (the join).
PARTNER_TIMEOUT = "partner_timeout"
#: Not a finite number (the join), or giving a power that is not one (the operation statistics).
INVALID_VALUE = "invalid_value"
#: Giving a power beyond the component's physical bound: a fault, not a load (the operation
#: statistics).
BEYOND_BOUND = "beyond_physical_bound"
#: Of a quantity name beyond the key's limit of names (``operators.limit``): never state.
QUANTITY_LIMIT = "quantity_limit"

ALL: tuple[str, ...] = (
    BEHIND_WATERMARK,
    WINDOW_CLOSED,
    DUPLICATE,
    SUPERSEDED,
    FUTURE_TIMESTAMP,
    PARTNER_TIMEOUT,
    INVALID_VALUE,
    BEYOND_BOUND,
    QUANTITY_LIMIT,
)
