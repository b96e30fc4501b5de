"""The demo's PNGs: throughput per stage and latency per measurement over the run (from the
sampled /metrics), a joined power series with its inputs, and window aggregates (mean with its
min/max band), the last two read back from InfluxDB so they show what a dashboard would."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from stacktools.demo.latency import QUANTILES, latency_view  # noqa: E402
from stacktools.demo.sampler import Samples  # noqa: E402
from stacktools.influx import InfluxClient  # noqa: E402
from streamkit.config import Settings  # noqa: E402

MAX_POINTS = 20_000


def _frame(settings: Settings, database: str, statement: str) -> pd.DataFrame:
    status, body = InfluxClient(settings).query(statement, database=database, epoch="ms")
    series = body.get("results", [{}])[0].get("series", []) if status == 200 else []
    if not series:
        return pd.DataFrame()
    frame = pd.DataFrame(series[0]["values"], columns=series[0]["columns"])
    frame["time"] = pd.to_datetime(frame["time"], unit="ms")
    return frame


def _tag_values(
    settings: Settings, database: str, measurement: str, key: str, where: str = ""
) -> list[str]:
    status, body = InfluxClient(settings).query(
        f'SHOW TAG VALUES FROM "{measurement}" WITH KEY = "{key}"{where}', database=database
    )
    series = body.get("results", [{}])[0].get("series", []) if status == 200 else []
    return sorted(value for _, value in series[0]["values"]) if series else []


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def throughput(samples: Samples, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 4.5))
    times = pd.Series(samples.times)
    for name, series in samples.counters.items():
        rate = pd.Series(series).diff() / times.diff()
        ax.plot(times, rate.rolling(3, min_periods=1).mean(), label=name)
    ax.set(
        title="Throughput per stage", xlabel="seconds since start", ylabel="per second (3 s mean)"
    )
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def latency(samples: Samples, live: bool, path: Path) -> Path | None:
    """p50 (solid) and p99 (dashed) per measurement over the run, on a log axis (raw points take
    a fraction of a second, aggregates wait for their window to close). None without any
    observation."""
    view = latency_view(samples, live)
    if not view.series:
        return None
    fig, ax = plt.subplots(figsize=(10, 4.5))
    clipped = False
    for index, (measurement, quantiles) in enumerate(view.series.items()):
        for q, style in zip(QUANTILES, ("-", "--")):
            values = [math.nan if v is None else min(v, view.top_bound_s) for v in quantiles[q]]
            clipped |= any(v is not None and v > view.top_bound_s for v in quantiles[q])
            ax.plot(
                samples.times, values, style, color=f"C{index}", label=f"{measurement} p{q * 100:g}"
            )
    ax.set_yscale("log")
    ax.set(
        title=view.title,
        xlabel="seconds since start",
        ylabel="seconds" + (f" (beyond {view.top_bound_s:g} s: drawn at it)" if clipped else ""),
    )
    ax.title.set_fontsize(10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(ncol=2, fontsize=8)
    return _save(fig, path)


def joined_power(settings: Settings, database: str, path: Path) -> Path | None:
    thing = next(iter(_tag_values(settings, database, "joined", "thing")), None)
    if thing is None:
        return None
    joined = _frame(
        settings,
        database,
        f'SELECT "result", "left_value", "right_value", "pair", "result_name" '
        f'FROM "joined" WHERE "thing" = \'{thing}\' LIMIT {MAX_POINTS}',
    )
    if joined.empty:
        return None
    pair, result_name = joined["pair"].iloc[0], joined["result_name"].iloc[0]
    left, right = pair.split(":", 1)
    joined = joined[joined["pair"] == pair]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 6.5), sharex=True)
    top.plot(joined["time"], joined["result"], lw=0.8, color="tab:red")
    top.set(title=f"{thing}: {result_name} from {left} x {right}", ylabel=result_name)
    bottom.plot(joined["time"], joined["left_value"], lw=0.8, label=left)
    twin = bottom.twinx()
    twin.plot(joined["time"], joined["right_value"], lw=0.8, color="tab:green", label=right)
    bottom.set(ylabel=left)
    twin.set(ylabel=right)
    bottom.legend(loc="upper left")
    twin.legend(loc="upper right")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    bottom.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
    fig.autofmt_xdate()
    return _save(fig, path)


def window_aggregates(settings: Settings, database: str, path: Path) -> Path | None:
    thing = next(iter(_tag_values(settings, database, "aggregate", "thing")), None)
    if thing is None:
        return None
    quantities = _tag_values(
        settings, database, "aggregate", "quantity", f" WHERE \"thing\" = '{thing}'"
    )
    shown = quantities[:3]
    fig, axes = plt.subplots(
        len(shown), 1, figsize=(11, 2.8 * len(shown)), sharex=True, squeeze=False
    )
    for ax, quantity in zip(axes[:, 0], shown):
        frame = _frame(
            settings,
            database,
            f'SELECT "mean", "min", "max", "window" FROM "aggregate" '
            f"WHERE \"thing\" = '{thing}' AND \"quantity\" = '{quantity}' "
            f"LIMIT {MAX_POINTS}",
        )
        if frame.empty:
            continue
        window = sorted(frame["window"].unique())[0]
        frame = frame[frame["window"] == window]
        ax.fill_between(
            frame["time"], frame["min"], frame["max"], alpha=0.25, step="post", label="min..max"
        )
        ax.step(frame["time"], frame["mean"], where="post", lw=0.9, label="mean")
        ax.set(title=f"{thing} {quantity} ({window} windows)", ylabel=quantity)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right")
    fig.autofmt_xdate()
    return _save(fig, path)
