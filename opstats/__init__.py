"""Operation statistics per component: load spectrum, duty cycle and energy from the power.

Pure (numpy only, no Spark), a keyed operator like the join and the windows: the machine
catalogue of ratings (:mod:`opstats.catalogue`), components found in quantity names
(:mod:`opstats.components`), the sample-and-hold power signal integrated into reference cycles
(:mod:`opstats.signal`, :mod:`opstats.cycles`) and the operator (:mod:`opstats.operator`).
The definitions, with a worked example: ``docs/operation-statistics.md``.
"""

from opstats.catalogue import Catalogue, Rating, load_catalogue
from opstats.components import Pattern, PowerInputs
from opstats.cycles import CycleStats
from opstats.errors import CatalogueError
from opstats.operator import OperationStatistics, StatsConfig, StatsStep

__all__ = [
    "Catalogue",
    "CatalogueError",
    "CycleStats",
    "OperationStatistics",
    "Pattern",
    "PowerInputs",
    "Rating",
    "StatsConfig",
    "StatsStep",
    "load_catalogue",
]
