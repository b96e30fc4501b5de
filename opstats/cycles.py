"""One reference cycle's figures for one component, and how they are added up.

Durations are whole milliseconds (exact); energy is a float sum taken piece by piece in time
order, the pieces being fixed by the data (record times, ends of holds, cycle boundaries), so
the same data gives the same bits however it was cut into batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opstats.catalogue import Rating

#: W*ms in a kWh
WMS_PER_KWH = 3_600_000_000.0


@dataclass
class OpenCycle:
    """The cycle under way: what its pieces with data added so far."""

    start_ms: int
    band_ms: list[int]
    data_ms: int = 0
    #: integrals of P where P > 0 and of -P where P < 0, in W*ms
    motoring_wms: float = 0.0
    regenerative_wms: float = 0.0
    peak_w: float = 0.0

    def add(self, power_w: float, band: int, duration_ms: int) -> None:
        self.band_ms[band] += duration_ms
        self.data_ms += duration_ms
        if power_w >= 0:
            self.motoring_wms += power_w * duration_ms
        else:
            self.regenerative_wms += -power_w * duration_ms
        magnitude = abs(power_w)
        if magnitude > self.peak_w:
            self.peak_w = magnitude


@dataclass(frozen=True)
class CycleStats:
    """A closed reference cycle of one component (docs/operation-statistics.md)."""

    component: str
    start_ms: int
    end_ms: int
    rating_id: str
    rating: Rating = field(compare=False)
    #: ms with |P| in each band of the rating, the overload band (above rated) last
    band_ms: tuple[int, ...]
    data_ms: int
    motoring_kwh: float
    regenerative_kwh: float
    #: the time-weighted mean of |P| over the time with data
    mean_w: float
    peak_w: float
    #: ms per band since the component's first record (under this rating), this cycle included
    cumulative_ms: tuple[int, ...]

    @property
    def cycle_ms(self) -> int:
        return self.end_ms - self.start_ms

    @property
    def no_data_ms(self) -> int:
        return self.cycle_ms - self.data_ms

    @property
    def energy_kwh(self) -> float:
        return self.motoring_kwh + self.regenerative_kwh

    @property
    def top_ms(self) -> int:
        """ms in the top band or above it: the load time of the duty cycle."""
        return self.band_ms[-2] + self.band_ms[-1]

    @property
    def overload_ms(self) -> int:
        return self.band_ms[-1]

    @property
    def duty_pct(self) -> float:
        """The relative duty factor: load time (top band and above) / time with data, in %."""
        return 100.0 * self.top_ms / self.data_ms

    @property
    def mean_pct(self) -> float:
        return 100.0 * self.mean_w / self.rating.rated_power_w

    @property
    def peak_pct(self) -> float:
        return 100.0 * self.peak_w / self.rating.rated_power_w

    @property
    def duty_exceeded(self) -> bool:
        return self.duty_pct > self.rating.duty_rating_pct


def close(
    cycle: OpenCycle, component: str, cycle_ms: int, rating: Rating, cumulative: list[int]
) -> CycleStats:
    """The cycle's figures; adds its band times to ``cumulative`` first."""
    for band, duration in enumerate(cycle.band_ms):
        cumulative[band] += duration
    return CycleStats(
        component,
        cycle.start_ms,
        cycle.start_ms + cycle_ms,
        rating.rating_id,
        rating,
        tuple(cycle.band_ms),
        cycle.data_ms,
        cycle.motoring_wms / WMS_PER_KWH,
        cycle.regenerative_wms / WMS_PER_KWH,
        (cycle.motoring_wms + cycle.regenerative_wms) / cycle.data_ms,
        cycle.peak_w,
        tuple(cumulative),
    )
