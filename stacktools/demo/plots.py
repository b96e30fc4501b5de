"""The demo's PNGs: throughput per stage and latency per measurement over the run (from the
sampled /metrics), a joined power series with its inputs, and window aggregates (mean with its
min/max band), the last two read back from InfluxDB so they show what a dashboard would.

Machine data come in bursts days apart, so the last two show the busiest machine's busiest
stretch without a gap (and say so), with lines broken wherever the data have a gap
(stacktools.demo.shaping decides all of that).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402

from stacktools.demo import shaping  # noqa: E402
from stacktools.demo.latency import QUANTILES, latency_view  # noqa: E402
from stacktools.demo.sampler import Samples  # noqa: E402
from stacktools.stack.influx import InfluxClient  # noqa: E402
from stacktools.stack.settings import Settings
from streamkit.wire.retention import source

#: At most this many points are read back for one series (a machine's joined pairs).
MAX_POINTS = 200_000
#: the joined picture's pairs (components) drawn at most, the most frequent first, and their colors
MAX_PAIRS_DRAWN = 4
PAIR_COLORS = ("tab:red", "tab:purple", "tab:orange", "tab:brown")
#: Modest: the PNGs are committed to docs/images.
DPI = 90
#: Markers by measurement in the latency plot: lines that coincide stay told apart.
MARKERS = {"raw": "o", "joined": "s", "aggregate": "^", "late": "v", "dead_letter": "x"}
SINCE_START = "time since the replay started [s]"


def _series(settings: Settings, database: str, statement: str) -> list[dict]:
    status, body = InfluxClient(settings).query(statement, database=database, epoch="ms")
    return body.get("results", [{}])[0].get("series", []) if status == 200 else []


def _frame(settings: Settings, database: str, statement: str) -> pd.DataFrame:
    series = _series(settings, database, statement)
    if not series:
        return pd.DataFrame()
    frame = pd.DataFrame(series[0]["values"], columns=series[0]["columns"])
    frame["time"] = pd.to_datetime(frame["time"], unit="ms")
    return frame


def _counts(settings: Settings, database: str, measurement: str, field: str) -> dict[str, int]:
    """Points per machine of a measurement."""
    return {
        entry["tags"]["thing"]: int(entry["values"][0][1])
        for entry in _series(
            settings,
            database,
            f'SELECT count("{field}") FROM {source(measurement)} GROUP BY "thing"',
        )
    }


def _tag_values(
    settings: Settings, database: str, measurement: str, key: str, where: str = ""
) -> list[str]:
    status, body = InfluxClient(settings).query(
        f'SHOW TAG VALUES FROM {source(measurement)} WITH KEY = "{key}"{where}', database=database
    )
    series = body.get("results", [{}])[0].get("series", []) if status == 200 else []
    return sorted(value for _, value in series[0]["values"]) if series else []


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _stretch(frame: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows of the busiest stretch without a gap, and a line that says what was left out."""
    found = shaping.busiest_stretch(frame["time"])
    if found is None:
        return frame, ""
    start, end, size = found
    shown = frame[(frame["time"] >= start) & (frame["time"] <= end)]
    runs = len(shaping.stretches(frame["time"]))
    span = frame["time"].max() - frame["time"].min()
    first, last = pd.Timestamp(start), pd.Timestamp(end)
    when = f"{first:%Y-%m-%d %H:%M:%S}–{last:%H:%M:%S} UTC"
    rest = (
        f"{size:,} of {len(frame):,} points; the others in {runs - 1:,} more stretches over "
        f"{_span_words(span)}"
        if runs > 1
        else f"all {len(frame):,} points"
    )
    return shown, f"{when}, the busiest stretch without a gap ({rest})"


def _span_words(span: pd.Timedelta) -> str:
    hours = span.total_seconds() / 3600
    return f"{hours / 24:.1f} days" if hours >= 48 else f"{hours:.1f} hours"


def _time_axis(ax: plt.Axes) -> None:
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    ax.set_xlabel("event time [UTC]")


def throughput(samples: Samples, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
    times = pd.Series(samples.times)
    for name, series in samples.counters.items():
        rate = pd.Series(series).diff() / times.diff()
        ax.plot(times, rate.rolling(3, min_periods=1).mean(), label=name)
    ax.set(
        title="Throughput per stage",
        xlabel=SINCE_START,
        ylabel="rate [1/s], mean over 3 s",
    )
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(alpha=0.3)
    fig.legend(ncol=len(samples.counters), fontsize=8, loc="outside lower center")
    return _save(fig, path)


def latency(samples: Samples, live: bool, path: Path) -> Path | None:
    """p50 (solid) and p99 (dashed) per measurement over the run, on a log axis (raw points take
    a fraction of a second, aggregates wait for their window to close). The measurements often
    coincide (joined pairs and aggregates leave Spark in the same transaction), so each has its
    marker, and each is drawn wider than and underneath the one before it. None without any
    observation."""
    view = latency_view(samples, live)
    if not view.series:
        return None
    fig, ax = plt.subplots(figsize=(10, 5), layout="constrained")
    clipped = False
    lowest = math.inf
    count = len(view.series)
    for index, (measurement, quantiles) in enumerate(view.series.items()):
        for q, style in zip(QUANTILES, ("-", "--"), strict=True):
            values = [math.nan if v is None else min(v, view.top_bound_s) for v in quantiles[q]]
            clipped |= any(v is not None and v > view.top_bound_s for v in quantiles[q])
            lowest = min([lowest, *(v for v in values if v > 0)])
            ax.plot(
                samples.times,
                values,
                style,
                color=f"C{index}",
                lw=1.0 + 1.5 * index,
                marker=MARKERS.get(measurement, "."),
                ms=3 + 2.5 * index,
                mfc=f"C{index}" if index == 0 else "none",
                zorder=3 + count - index,
                label=f"{measurement} p{q * 100:g}",
            )
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    if math.isfinite(lowest):  # down to a labelled tick, so the lowest line can be read off
        ax.set_ylim(bottom=_tick_below(lowest))
    title, _, why = view.title.partition(" (")
    ax.set(
        title=title + (f"\n({why}" if why else ""),
        xlabel=SINCE_START,
        ylabel="latency [s]" + (f", beyond {view.top_bound_s:g} s drawn at it" if clipped else ""),
    )
    ax.title.set_fontsize(10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(ncol=count, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    return _save(fig, path)


def _tick_below(value: float) -> float:
    """The largest of 1, 2 or 5 times a power of ten at or below ``value`` (> 0)."""
    power = 10.0 ** math.floor(math.log10(value))
    return max(step * power for step in (1.0, 2.0, 5.0) if step * power <= value * (1 + 1e-9))


def _broken_line(ax: plt.Axes, frame: pd.DataFrame, column: str, **style: Any) -> None:
    """A line through ``column`` that stops at every gap, with a dot on every point: a point
    alone between two gaps is still seen."""
    broken = shaping.break_gaps(frame[["time", column]])
    ax.plot(broken["time"], broken[column], marker=".", ms=2.5, lw=0.9, **style)


def joined_power(settings: Settings, database: str, path: Path) -> Path | None:
    """The busiest machine's joined result, one line per pair (a pattern pair: per component),
    and below the two inputs of its most frequent pair."""
    thing = shaping.busiest(_counts(settings, database, "joined", "result"))
    if thing is None:
        return None
    joined = _frame(
        settings,
        database,
        f'SELECT "result", "left_value", "right_value", "pair", "result_name", "component" '
        f"FROM {source('joined')} WHERE \"thing\" = '{thing}' LIMIT {MAX_POINTS}",
    )
    if joined.empty:
        return None
    if "component" not in joined.columns:  # explicit pairs only: no such tag
        joined["component"] = None
    shown, note = _stretch(joined)
    pairs = list(joined["pair"].value_counts().index[:MAX_PAIRS_DRAWN])
    pair = pairs[0]  # the machine's most frequent pair
    result_name = joined.loc[joined["pair"] == pair, "result_name"].iloc[0]
    left, right = pair.split(":", 1)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True, layout="constrained")
    if len(pairs) > 1:
        title = f"{thing} (most joined pairs): {result_name} of {len(pairs)} pairs; below, "
        fig.suptitle(f"{title}{left} and {right}")
    else:
        fig.suptitle(
            f"{thing} (the machine with most joined pairs): {result_name} from {left} and {right}"
        )
    top.set_title(note, fontsize=9)
    for drawn, color in zip(pairs, PAIR_COLORS, strict=False):
        mine = shown[shown["pair"] == drawn]
        component = mine["component"].dropna()
        label = mine["result_name"].iloc[0] if len(mine) else result_name
        if len(pairs) > 1:  # a component's, or an explicit pair's own name
            label += f" {component.iloc[0]}" if len(component) else f" {drawn}"
        _broken_line(top, mine, "result", color=color, label=label)
    top.set_ylabel(shaping.axis_label(result_name))
    inputs = shown[shown["pair"] == pair]
    _broken_line(bottom, inputs, "left_value", color="tab:blue", label=left)
    twin = bottom.twinx()
    _broken_line(twin, inputs, "right_value", color="tab:green", label=right)
    bottom.set_ylabel(shaping.axis_label(left), color="tab:blue")
    twin.set_ylabel(shaping.axis_label(right), color="tab:green")
    handles = [*top.get_lines(), *bottom.get_lines(), *twin.get_lines()]
    fig.legend(handles, [h.get_label() for h in handles], loc="outside lower center", ncol=3)
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    _time_axis(bottom)
    return _save(fig, path)


def window_aggregates(settings: Settings, database: str, path: Path) -> Path | None:
    thing = shaping.busiest(_counts(settings, database, "aggregate", "mean"))
    if thing is None:
        return None
    where = f" WHERE \"thing\" = '{thing}'"
    window = shaping.preferred_window(_tag_values(settings, database, "aggregate", "window", where))
    quantities = shaping.mattering(_tag_values(settings, database, "aggregate", "quantity", where))
    if window is None or not quantities:
        return None
    frames = {
        quantity: _frame(
            settings,
            database,
            f'SELECT "mean", "min", "max" FROM {source("aggregate")} WHERE "thing" = \'{thing}\' '
            f"AND \"quantity\" = '{quantity}' AND \"window\" = '{window}' LIMIT {MAX_POINTS}",
        )
        for quantity in quantities
    }
    frames = {q: f for q, f in frames.items() if not f.empty}
    if not frames:
        return None
    starts = pd.concat([f[["time"]] for f in frames.values()]).drop_duplicates()
    shown, note = _stretch(starts)
    first, last = shown["time"].min(), shown["time"].max()
    slide_ms = shaping.window_slide_ms(window)
    slide = pd.Timedelta(milliseconds=slide_ms) if slide_ms else None
    fig, axes = plt.subplots(
        len(frames),
        1,
        figsize=(10, 1.0 + 2.4 * len(frames)),
        sharex=True,
        squeeze=False,
        layout="constrained",
    )
    fig.suptitle(
        f"{thing} (the machine with most windows): {shaping.window_words(window)} windows, "
        "mean and min..max of each"
    )
    axes[0, 0].set_title(note.replace(" points", " windows"), fontsize=9)
    for ax, (quantity, frame) in zip(axes[:, 0], frames.items(), strict=True):
        frame = frame[(frame["time"] >= first) & (frame["time"] <= last)]
        # a window starts where the previous one ended: any further apart is a missing window
        steps = shaping.break_gaps(frame, threshold=slide, end=slide)
        ax.fill_between(
            steps["time"],
            steps["min"],
            steps["max"],
            step="post",
            color="tab:blue",
            alpha=0.3,
            lw=0,
            label="min..max",
        )
        ax.step(steps["time"], steps["mean"], where="post", lw=1.1, color="navy", label="mean")
        ax.set_ylabel(shaping.axis_label(quantity))
        ax.grid(alpha=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=2)
    _time_axis(axes[-1, 0])
    return _save(fig, path)
