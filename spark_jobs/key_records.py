"""A key's rows of one micro-batch as the operators' numpy columns, in arrival order. Taken from
Spark's pandas frames once per call; every later step (the join, each quantity's windows)
slices arrays instead of frames, which costs a fraction."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from operators import Records

if TYPE_CHECKING:
    import pandas as pd


def arrival_order(frames: Iterable[pd.DataFrame]) -> Records:
    """The frames' rows by (Kafka partition, offset): a thing lives in one partition, so this is
    the order its records were written in."""
    import pandas as pd

    parts = list(frames)
    if not parts:
        return Records.empty()
    batch = parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    order = np.lexsort((batch["kafka_offset"].to_numpy(), batch["kafka_partition"].to_numpy()))
    return Records(
        batch["quantity"].to_numpy(dtype=object)[order],
        batch["event_time_ms"].to_numpy(dtype=np.int64)[order],
        batch["value"].to_numpy(dtype=np.float64)[order],
        batch["row_id"].to_numpy(dtype=object)[order],
    )
