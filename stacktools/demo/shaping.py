"""The data shaping behind the demo's plots, kept apart from matplotlib so it can be tested.

Machine data come in bursts with hours or days between them. A plotted line joins whatever
points it is given, so a gap must become a NaN (where a line breaks), and a stretch of a few
minutes must be chosen to be seen at all on an axis that spans days. Which machine, which
quantities and what the axes say are decided here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from streamkit.wire.labels import parse_window_label

#: A spacing this many times the typical (median) one is a gap.
GAP_FACTOR = 5.0

#: The quantities a plot shows first, in this order (a machine tool's power, spindle speed and
#: torque); a name counts when it contains the word, case-insensitively.
MATTERING = ("power", "speed", "torque")

#: Units by a word in the quantity's name, as the simulator and the join's result define them
#: (simulator/generate.py; lsb/results.py: P [W] = 2*pi/60 * n [rpm] * M [Nm]).
UNITS = (
    ("power", "W"),
    ("speed", "rpm"),
    ("torque", "Nm"),
    ("curr", "A"),
    ("load", "%"),
    ("state", "0/1"),
)


def typical_spacing(times: pd.Series) -> pd.Timedelta | float | None:
    """The median spacing of sorted times (None for fewer than two distinct ones)."""
    steps = times.sort_values().diff().dropna()
    if steps.empty:
        return None
    steps = steps[steps > steps.iloc[0] * 0]  # zero of the series' type: distinct times only
    return None if steps.empty else steps.median()


def gap_threshold(times: pd.Series, factor: float = GAP_FACTOR) -> pd.Timedelta | float | None:
    """A spacing above this is a gap: ``factor`` times the typical spacing of the data."""
    spacing = typical_spacing(times)
    return None if spacing is None else spacing * factor


def break_gaps(
    frame: pd.DataFrame,
    threshold: pd.Timedelta | float | None = None,
    end: pd.Timedelta | float | None = None,
    time: str = "time",
) -> pd.DataFrame:
    """``frame`` sorted by ``time`` with a row of NaNs after every gap (a spacing above
    ``threshold``, default :func:`gap_threshold`), so a line drawn through it stops there.

    The NaN row sits ``end`` after the point before the gap (default: the typical spacing),
    where a step plot's last step ends; ``end`` also adds one after the last point."""
    frame = frame.sort_values(time, kind="stable").reset_index(drop=True)
    if len(frame) < 2 and end is None:
        return frame
    threshold = gap_threshold(frame[time]) if threshold is None else threshold
    if threshold is None:
        return frame
    tail = typical_spacing(frame[time]) if end is None else end
    steps = frame[time].diff().shift(-1)
    after = list(frame.index[steps > threshold])
    if end is not None and len(frame):
        after.append(frame.index[-1])
    if not after:
        return frame
    breaks = pd.DataFrame(
        {
            column: frame.loc[after, time] + tail if column == time else np.nan
            for column in frame.columns
        }
    )
    breaks.index = pd.Index([i + 0.5 for i in after])
    joined = pd.concat([frame.astype({c: float for c in _numeric(frame, time)}), breaks])
    return joined.sort_index().reset_index(drop=True)


def _numeric(frame: pd.DataFrame, time: str) -> list[str]:
    """Integer columns become floats: they must hold the NaNs of the breaks."""
    return [c for c in frame.columns if c != time and pd.api.types.is_integer_dtype(frame[c])]


def stretches(times: pd.Series, threshold: pd.Timedelta | float | None = None) -> list[slice]:
    """The runs of sorted ``times`` without a gap, as index slices of the sorted series."""
    ordered = times.sort_values().reset_index(drop=True)
    if ordered.empty:
        return []
    threshold = gap_threshold(ordered) if threshold is None else threshold
    if threshold is None:
        return [slice(0, len(ordered))]
    cuts = [i + 1 for i in np.flatnonzero((ordered.diff().shift(-1) > threshold).to_numpy())]
    bounds = [0, *cuts, len(ordered)]
    return [slice(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]


def busiest_stretch(
    times: pd.Series, threshold: pd.Timedelta | float | None = None
) -> tuple[object, object, int] | None:
    """First and last time and size of the run without a gap that holds the most points (the
    earliest of equals); None without points."""
    ordered = times.sort_values().reset_index(drop=True)
    runs = stretches(ordered, threshold)
    if not runs:
        return None
    best = max(runs, key=lambda run: (run.stop - run.start, -run.start))
    return ordered.iloc[best.start], ordered.iloc[best.stop - 1], best.stop - best.start


def busiest(counts: Mapping[str, int]) -> str | None:
    """The machine with the most records (the alphabetically first of equals): the one a plot
    of a single machine shows; None when there is none."""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ranked[0][0] if ranked and ranked[0][1] > 0 else None


def mattering(quantities: Iterable[str], at_most: int = 3) -> list[str]:
    """Up to ``at_most`` quantities: one per word of :data:`MATTERING` (the alphabetically first
    that has it, so ``actSpeed`` before ``cmdSpeed``), then the rest alphabetically."""
    names = sorted(set(quantities))
    chosen: list[str] = []
    for word in MATTERING:
        match = next((n for n in names if word in n.lower() and n not in chosen), None)
        if match is not None:
            chosen.append(match)
    chosen += [n for n in names if n not in chosen]
    return chosen[:at_most]


def unit(quantity: str) -> str | None:
    """The unit of a quantity, from a word in its name; None when no word is known."""
    lowered = quantity.lower()
    return next((symbol for word, symbol in UNITS if word in lowered), None)


def axis_label(quantity: str) -> str:
    """``actSpeed_C11 [rpm]``; an unknown unit is said so rather than left out."""
    return f"{quantity} [{unit(quantity) or 'unit unknown'}]"


def duration_words(ms: int) -> str:
    """``500 ms``, ``10 s``, ``90 s``, ``5 min``, ``2 h``: the largest unit that divides it."""
    for size, name in ((3_600_000, "h"), (60_000, "min"), (1_000, "s")):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {name}"
    return f"{ms} ms"


def window_words(label: str) -> str:
    """A window tag in words: ``tumbling-10000`` -> ``10 s tumbling``, ``sliding-60000-10000``
    -> ``1 min sliding every 10 s``, ``session-30000`` -> ``sessions (30 s gap)``; any other
    text as it is."""
    try:
        kind, size_ms, slide_ms = parse_window_label(label)
    except ValueError:
        return label
    if kind == "sliding":
        return f"{duration_words(size_ms)} sliding every {duration_words(slide_ms)}"
    if kind == "session":
        return f"sessions ({duration_words(size_ms)} gap)"
    return f"{duration_words(size_ms)} tumbling"


def preferred_window(labels: Sequence[str]) -> str | None:
    """The window a plot shows: the shortest tumbling one (its windows neither overlap nor vary
    in length, so a step line says what each window held), else the first label."""
    parsed = []
    for label in labels:
        try:
            parsed.append((parse_window_label(label), label))
        except ValueError:
            continue
    tumbling = sorted((w.size_ms, label) for w, label in parsed if w.kind == "tumbling")
    if tumbling:
        return tumbling[0][1]
    return sorted(labels)[0] if labels else None


def window_slide_ms(label: str) -> int | None:
    """How far apart the starts of consecutive windows are (None: sessions, or not a label)."""
    try:
        kind, _, slide_ms = parse_window_label(label)
    except ValueError:
        return None
    return None if kind == "session" else slide_ms
