"""LocalStreamBuffer (LSB): deterministic, order-independent time-series join.

Per key and quantity pair (left L, right R) every record x is paired with the
other stream's latest record at or before it (prev) and earliest at or after
it (next); the output is the *set* of those pairs, each emitted once, as soon
as it is certain.  See docs/join.md.  Pure Python + numpy: no Spark here.

Entry points:

* :func:`process_batch` / :func:`flush` - vectorized, one key per call (Spark).
* :class:`LocalStreamBuffer` - many keys in memory (tests, offline use), a record at a time
  or many.
* :class:`JoinOperator` - the join as a keyed operator (``operators.contract``), what the
  Spark jobs run.
* :func:`to_bytes` / :func:`from_bytes` - the state in the operators' versioned encoding.
"""

from .batch import BatchResult, flush, process_batch, quantity_codes
from .buffer import LocalStreamBuffer
from .config import END_TIME, NO_TIME, JoinConfig, PairSpec
from .operator import JoinOperator, JoinStep
from .output import JoinedPair, LateColumns, LateRecord, PairColumns
from .policies import REASONS
from .results import RESULT_FUNCTIONS, event_time, mechanical_power, pair_id, pair_ids
from .serde import from_bytes, to_bytes
from .state import JoinState

__all__ = [
    "BatchResult",
    "END_TIME",
    "JoinConfig",
    "JoinOperator",
    "JoinState",
    "JoinStep",
    "JoinedPair",
    "LateColumns",
    "LateRecord",
    "LocalStreamBuffer",
    "NO_TIME",
    "PairColumns",
    "PairSpec",
    "REASONS",
    "RESULT_FUNCTIONS",
    "event_time",
    "flush",
    "from_bytes",
    "mechanical_power",
    "pair_id",
    "pair_ids",
    "process_batch",
    "quantity_codes",
    "to_bytes",
]
