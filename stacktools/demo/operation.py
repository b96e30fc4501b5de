"""The demo's operation statistics, read back from InfluxDB as a dashboard would: per component,
over every machine, the load spectrum (share of the time with data in each band), the duty
cycle against its rating and the energy; and a picture of the busiest machine (most energy):
its spectrum and each cycle's duty cycle per component."""

from __future__ import annotations

import json
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from stacktools.stack.influx import InfluxClient  # noqa: E402
from stacktools.stack.settings import Settings
from streamkit.wire.retention import source

#: Bands by their lower edge (% of rated) from light to dark; the overload band darkest.
BAND_MAP = matplotlib.colormaps["YlOrRd"]
OVERLOAD_COLOUR = "#4a0010"
DPI = 90


@dataclass
class ComponentFigures:
    """One component over the machines (or one machine): what the summary prints."""

    cycles: int = 0
    cycles_over_rating: int = 0
    duty_max_pct: float = 0.0
    duty_rating_pct: float = 0.0
    energy_kwh: float = 0.0
    regenerative_kwh: float = 0.0
    band_hours: dict[str, float] = field(default_factory=dict)

    @property
    def data_hours(self) -> float:
        return sum(self.band_hours.values())


def _series(settings: Settings, database: str, statement: str) -> list[dict]:
    status, body = InfluxClient(settings).query(statement, database=database, epoch="ms")
    return body.get("results", [{}])[0].get("series", []) if status == 200 else []


def _band_order(name: str) -> float:
    """``0-20`` < ``20-40`` < ... < ``over-100``."""
    return float("inf") if name.startswith("over-") else float(name.split("-")[0])


def per_machine(settings: Settings, database: str) -> dict[tuple[str, str], ComponentFigures]:
    """Every (thing, component)'s figures, summed over its cycles."""
    out: dict[tuple[str, str], ComponentFigures] = defaultdict(ComponentFigures)
    cycles = (
        'SELECT count("duty_pct"), sum("duty_exceeded"), max("duty_pct"), '
        'max("duty_rating_pct"), sum("energy_kwh"), sum("regenerative_kwh") '
        f"FROM {source('opstats')} "
        'GROUP BY "thing", "component"'
    )
    for s in _series(settings, database, cycles):
        _, count, over, duty_max, rating, energy, regenerative = s["values"][0]
        f = out[s["tags"]["thing"], s["tags"]["component"]]
        f.cycles, f.cycles_over_rating = int(count), int(over or 0)
        f.duty_max_pct, f.duty_rating_pct = float(duty_max), float(rating)
        f.energy_kwh, f.regenerative_kwh = float(energy), float(regenerative)
    bands = (
        f'SELECT sum("seconds") FROM {source("opstats_band")} GROUP BY "thing", "component", "band"'
    )
    for s in _series(settings, database, bands):
        tags = s["tags"]
        out[tags["thing"], tags["component"]].band_hours[tags["band"]] = (
            float(s["values"][0][1]) / 3600.0
        )
    return dict(out)


def per_component(machines: dict[tuple[str, str], ComponentFigures]) -> dict[str, ComponentFigures]:
    """The machines' figures added up per component."""
    out: dict[str, ComponentFigures] = defaultdict(ComponentFigures)
    for (_, component), f in sorted(machines.items()):
        total = out[component]
        total.cycles += f.cycles
        total.cycles_over_rating += f.cycles_over_rating
        total.duty_max_pct = max(total.duty_max_pct, f.duty_max_pct)
        total.duty_rating_pct = max(total.duty_rating_pct, f.duty_rating_pct)
        total.energy_kwh += f.energy_kwh
        total.regenerative_kwh += f.regenerative_kwh
        for band, hours in f.band_hours.items():
            total.band_hours[band] = total.band_hours.get(band, 0.0) + hours
    return dict(out)


def summary(settings: Settings, database: str) -> dict:
    """summary.json's ``operation_statistics``: per component and for the busiest machine."""
    machines = per_machine(settings, database)
    busiest = max(
        {thing for thing, _ in machines},
        key=lambda t: sum(f.energy_kwh for (m, _), f in machines.items() if m == t),
        default=None,
    )
    return {
        "per_component": {c: _plain(f) for c, f in per_component(machines).items()},
        "busiest_machine": busiest,
        "busiest": {c: _plain(f) for (t, c), f in sorted(machines.items()) if t == busiest},
    }


def _plain(f: ComponentFigures) -> dict:
    bands = sorted(f.band_hours, key=_band_order)
    return {
        "cycles": f.cycles,
        "cycles_over_duty_rating": f.cycles_over_rating,
        "duty_max_pct": round(f.duty_max_pct, 2),
        "duty_rating_pct": f.duty_rating_pct,
        "energy_kwh": round(f.energy_kwh, 3),
        "regenerative_kwh": round(f.regenerative_kwh, 3),
        "band_hours": {b: round(f.band_hours[b], 4) for b in bands},
    }


def alerts(settings: Settings, database: str) -> dict:
    """The overload alerts the run fired and resolved (``overload`` points), and those
    Alertmanager holds firing now."""
    counts = {"firing": 0, "resolved": 0}
    for s in _series(
        settings, database, f'SELECT count("since_ms") FROM {source("overload")} GROUP BY "status"'
    ):
        counts[s["tags"]["status"]] = int(s["values"][0][1])
    things = {
        s["tags"]["thing"]
        for s in _series(
            settings,
            database,
            f'SELECT last("since_ms") FROM {source("overload")} GROUP BY "thing"',
        )
    }
    try:
        url = (
            f"{settings.alertmanager_url}/api/v2/alerts?filter=alertname%3D%22ComponentOverload%22"
        )
        with urllib.request.urlopen(url, timeout=5) as response:
            held = [a for a in json.loads(response.read()) if a["labels"].get("thing") in things]
        in_alertmanager: int | None = len(held)
    except (OSError, ValueError):
        in_alertmanager = None
    return {
        **counts,
        "firing_in_alertmanager": in_alertmanager,
        "alertmanager": settings.alertmanager_url,
    }


def alerts_line(result: dict) -> str | None:
    """The summary's line on overload alerts; None when the run had no statistics."""
    info = result.get("overload_alerts")
    if info is None:
        return None
    held = info.get("firing_in_alertmanager")
    where = (
        f"; {held} firing in Alertmanager, {info['alertmanager']}"
        if held is not None
        else "; Alertmanager did not answer"
    )
    return (
        f"overload alerts       {info['firing']:>12,}  fired ({info['resolved']:,} resolved{where})"
    )


def lines(stats: dict) -> list[str]:
    """The summary's lines: one per component, its spectrum as shares of the time with data."""
    out = []
    for component, f in stats.get("per_component", {}).items():
        hours = f["band_hours"]
        total = sum(hours.values()) or 1.0
        spectrum = " ".join(f"{b} {100 * h / total:.0f}%" for b, h in hours.items())
        out.append(
            f"  {component:<6} {f['cycles']:>6,} cycles, duty max {f['duty_max_pct']:.0f}% "
            f"(rating {f['duty_rating_pct']:.0f}%, {f['cycles_over_duty_rating']:,} cycles "
            f"above), {f['energy_kwh']:,.1f} kWh ({f['regenerative_kwh']:,.1f} regenerative); "
            f"spectrum {spectrum}"
        )
    if out:
        out.insert(0, "operation statistics per component (every machine):")
    return out


def picture(settings: Settings, database: str, stats: dict, path: Path) -> Path | None:
    """The busiest machine: hours per band per component, and each cycle's duty cycle with the
    component's rating."""
    thing = stats.get("busiest_machine")
    if not thing:
        return None
    components = stats["busiest"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5), layout="constrained")
    fig.suptitle(f"{thing} (the machine with most energy): operation statistics per component")
    for row, f in enumerate(components.values()):
        start = 0.0
        for band, hours in f["band_hours"].items():
            over = band.startswith("over-")
            colour = OVERLOAD_COLOUR if over else BAND_MAP(0.08 + 0.8 * _band_order(band) / 100)
            left.barh(row, hours, left=start, color=colour, edgecolor="white", label=band)
            start += hours
    left.set_yticks(range(len(components)), list(components))
    left.set_xlabel("hours with data")
    left.set_title("load spectrum")
    handles, labels = left.get_legend_handles_labels()
    unique = dict(sorted(zip(labels, handles, strict=True), key=lambda b: _band_order(b[0])))
    left.legend(
        unique.values(),
        unique.keys(),
        fontsize=8,
        ncol=6,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.14),
        title="band: |P| in % of the component's rated power",
        title_fontsize=8,
    )
    statement = (
        f'SELECT "duty_pct", "duty_rating_pct" FROM {source("opstats")} '
        f'WHERE "thing" = \'{thing}\' GROUP BY "component"'
    )
    for s in _series(settings, database, statement):
        values = s["values"]
        times = [datetime.fromtimestamp(v[0] / 1000.0, tz=UTC) for v in values]
        line = right.plot(  # one dot per cycle: no line across the days without data
            times, [v[1] for v in values], "o", markersize=3, label=s["tags"]["component"]
        )[0]
        right.axhline(values[0][2], color=line.get_color(), linestyle="--", linewidth=0.8)
    right.set_ylabel("duty cycle per reference cycle [%] (dashed: the rating)")
    right.set_title("duty cycle (IEC 60034-1 S3)")
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
