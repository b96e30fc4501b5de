"""The operation statistics beside the join: settings to operator, cycles to Avro records.

With ``OPSTATS_POWER`` set, ``opstats.OperationStatistics`` runs as a part of each thing's
operator beside the join (the single pass: and the windows; the two-jobs shape: in the join
job), so its cycles go out in the same transaction as the pairs, wherever the state lives. A
closed cycle, or an overload alert it fired or resolved, leaves the state function as a Kafka
record already made: its key and Avro value (a cycle's band arrays are no flat column for
Spark's ``to_avro``), which the Spark route (``spark_jobs.outputs.encoded_route``) and the
driver's writer pass on as they are (the renderer: ``spark_jobs.renderers.StatsRows``). Records it
hands back become late rows of stage ``opstats``.
"""

from __future__ import annotations

import logging
from typing import Any

from prometheus_client import Counter

from opstats import (
    CatalogueError,
    CycleStats,
    OperationStatistics,
    Pattern,
    PowerInputs,
    StatsConfig,
    load_catalogue,
)
from opstats.overload import OverloadEvent
from spark_jobs.config import StatisticsSettings, result_function
from spark_jobs.outputs import OPSTATS, OVERLOAD
from streamkit.errors import ConfigError

STAGE = "opstats"  #: the part's name in the thing's operator and the late records' stage
#: The kinds of record the statistics write (``spark_jobs.outputs.OUTPUT_KINDS``).
KINDS = (OPSTATS, OVERLOAD)

log = logging.getLogger("spark_jobs.operation_stats")
DEFAULTED = Counter(
    "opstats_default_rating_components",
    "components whose operation statistics use the default rating: no catalogue entry names them",
)
#: (thing, component) already said to have the default rating, so each is said once
_said: set[tuple[str, str]] = set()
#: how many of them are remembered, whatever the input (a bound on memory)
SAID_AT_MOST = 100_000


def power_inputs(text: str) -> PowerInputs:
    """``OPSTATS_POWER``: LEFT:RIGHT[:result], each name with one ``*``."""
    parts = text.strip().split(":")
    if len(parts) not in (2, 3):
        raise ConfigError("OPSTATS_POWER", f"{text!r} is not LEFT:RIGHT[:result]")
    name = parts[2] if len(parts) == 3 else "mechanical_power"
    power = result_function(name, "OPSTATS_POWER")
    try:
        return PowerInputs(Pattern(parts[0]), Pattern(parts[1]), power, name)
    except ValueError as exc:
        raise ConfigError("OPSTATS_POWER", str(exc)) from None


def kinds(settings: StatisticsSettings) -> tuple[str, ...]:
    """The kinds of record the statistics write, none when they are off."""
    return KINDS if enabled(settings) else ()


def enabled(settings: StatisticsSettings) -> bool:
    return bool(settings.opstats_power.strip())


def stats_config(settings: StatisticsSettings) -> StatsConfig | None:
    """The statistics' configuration, the catalogue read and checked; None when off. A bad
    catalogue raises CatalogueError (exit code 2, naming the file, line and field)."""
    if not enabled(settings):
        return None
    return StatsConfig(
        power_inputs(settings.opstats_power),
        load_catalogue(settings.machine_catalogue or None),
        cycle=settings.opstats_cycle,
        max_hold=settings.opstats_max_hold,
        partner_timeout=settings.opstats_partner_timeout or None,  # zero: off
        overload_after=settings.opstats_overload_time or None,  # zero: off
        idle_timeout=settings.idle_flush(),
    )


def stats_operator(settings: StatisticsSettings) -> OperationStatistics | None:
    config = stats_config(settings)
    if config is None:
        return None
    try:
        return OperationStatistics(config, settings.max_future)
    except ValueError as exc:  # a duration the operator refuses (zero, a fraction of a ms)
        raise ConfigError("OPSTATS_CYCLE/OPSTATS_MAX_HOLD", str(exc)) from None


def say_defaulted(thing: str, component: str) -> None:
    """Once per component: its figures use the default rating (log and metric)."""
    if (thing, component) in _said or len(_said) >= SAID_AT_MOST:
        return
    _said.add((thing, component))
    DEFAULTED.inc()
    log.warning(
        "no machine catalogue entry names this component: its operation statistics use the "
        "default rating",
        extra={"thing": thing, "component": component},
    )


def cycle_record(thing: str, power_name: str, cycle: CycleStats) -> dict[str, Any]:
    """The Avro record (``opstats.avsc``) of one closed cycle."""
    rating = cycle.rating
    return {
        "thing": thing,
        "component": cycle.component,
        "power_name": power_name,
        "rating_id": cycle.rating_id,
        "cycle_start_ms": cycle.start_ms,
        "cycle_end_ms": cycle.end_ms,
        "rated_power_kw": rating.rated_power_kw,
        "duty_rating_pct": rating.duty_rating_pct,
        "rating_defaulted": rating.defaulted,
        "band_names": list(rating.band_names),
        "band_ms": list(cycle.band_ms),
        "cumulative_ms": list(cycle.cumulative_ms),
        "data_ms": cycle.data_ms,
        "duty_pct": cycle.duty_pct,
        "motoring_kwh": cycle.motoring_kwh,
        "regenerative_kwh": cycle.regenerative_kwh,
        "mean_w": cycle.mean_w,
        "peak_w": cycle.peak_w,
    }


def event_record(thing: str, event: OverloadEvent) -> dict[str, Any]:
    """The Avro record (``overload.avsc``) of one overload alert fired or resolved."""
    cycle = event.cycle
    return {
        "thing": thing,
        "component": cycle.component,
        "rating_id": cycle.rating_id,
        "status": event.status,
        "since_ms": event.since_ms,
        "cycle_start_ms": cycle.start_ms,
        "cycle_end_ms": cycle.end_ms,
        "why": event.why,
        "duty_pct": cycle.duty_pct,
        "duty_rating_pct": cycle.rating.duty_rating_pct,
        "overload_ms": cycle.overload_ms,
        "peak_w": cycle.peak_w,
        "rated_power_kw": cycle.rating.rated_power_kw,
    }


__all__ = [
    "KINDS",
    "STAGE",
    "CatalogueError",
    "cycle_record",
    "enabled",
    "event_record",
    "kinds",
    "power_inputs",
    "stats_config",
    "stats_operator",
]
