"""Which unexpected late points are copies the pipeline's at-least-once inputs delivered twice.

MQTT and the bridge are at-least-once with byte-identical re-sends (docs/exactly-once.md): after
a restart of the bridge or a reconnect of a machine, a record already in the raw topic arrives
again, and the join and the aggregates set it aside as late (`behind_watermark` or
`duplicate`). The file does not imply that point, yet it is not a wrong result: the raw point,
the pairs and the windows are unchanged. A late point counts as such a copy only when it carries
exactly the value the file gives that record; anything else stays an `extra`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: The reasons a stage gives an identical second copy of a record it has already seen.
COPY_REASONS = frozenset({"behind_watermark", "duplicate"})
_IDENTITY = ["thing", "quantity", "time_ms"]


def _text_keyed(frame: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame(
        {
            "thing": frame["thing"].astype(object).astype(str).to_numpy(),
            "quantity": frame["quantity"].astype(object).astype(str).to_numpy(),
            "time_ms": pd.to_numeric(frame["time_ms"], errors="coerce").to_numpy(np.float64),
        }
    )
    out["value"] = pd.to_numeric(frame["value"], errors="coerce").to_numpy(np.float64)
    return out


def resent_copies(expected_raw: pd.DataFrame, extra_late: pd.DataFrame) -> np.ndarray:
    """A boolean per row of ``extra_late``: an identical re-send of a record of the file."""
    if not len(extra_late):
        return np.zeros(0, dtype=bool)
    late = _text_keyed(extra_late)
    reasons = extra_late["reason"].astype(object).astype(str).to_numpy()
    late["position"] = np.arange(len(late))
    # only the raw records at a late point's time are candidates: text keys for those alone,
    # not for every record of a full-size file
    times = pd.to_numeric(expected_raw["time_ms"], errors="coerce").to_numpy(np.float64)
    candidates = expected_raw[np.isin(times, late["time_ms"].to_numpy())]
    raw = _text_keyed(candidates).rename(columns={"value": "raw_value"})
    matched = late.merge(raw, on=_IDENTITY, how="inner")
    same = matched["value"].to_numpy() == matched["raw_value"].to_numpy()
    mask = np.zeros(len(late), dtype=bool)
    mask[matched["position"].to_numpy()[same]] = True
    return mask & np.isin(reasons, list(COPY_REASONS))
