"""Components found in quantity names: ``actSpeed_*`` and ``vaTorque_*`` pair per suffix.

A component is one drive of a machine (a spindle, an axis); in the data it is the part of a
quantity's name a ``*`` stands for, e.g. ``C12`` in ``actSpeed_C12``. Components are found as
records arrive, never listed in advance, so a machine with a new axis needs no setting.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: f(left value, right value) -> power in W (a float, or numpy's; the join's result functions fit)
PowerFn = Callable[[float, float], float | np.floating | np.ndarray]

LEFT, RIGHT = 0, 1


@dataclass(frozen=True)
class Pattern:
    """One name with one ``*``: ``actSpeed_*``."""

    text: str

    def __post_init__(self) -> None:
        if self.text.count("*") != 1:
            raise ValueError(f"a component pattern has exactly one '*', got {self.text!r}")

    @property
    def prefix(self) -> str:
        return self.text.split("*")[0]

    @property
    def suffix(self) -> str:
        return self.text.split("*")[1]

    def component(self, quantity: str) -> str | None:
        """What ``*`` stands for in ``quantity`` (never empty), or None if it does not match."""
        prefix, suffix = self.prefix, self.suffix
        if (
            len(quantity) > len(prefix) + len(suffix)
            and quantity.startswith(prefix)
            and quantity.endswith(suffix)
        ):
            return quantity[len(prefix) : len(quantity) - len(suffix)]
        return None

    def quantity(self, component: str) -> str:
        return f"{self.prefix}{component}{self.suffix}"


@dataclass(frozen=True)
class PowerInputs:
    """The two inputs whose product is a component's power, and the function of them."""

    left: Pattern
    right: Pattern
    power: PowerFn
    name: str = "power"

    def __post_init__(self) -> None:
        if self.left == self.right:
            raise ValueError(f"the two inputs need two patterns, got {self.left.text!r} twice")

    def split(self, quantities: np.ndarray) -> list[tuple[str, int, np.ndarray]]:
        """(component, side, indices into ``quantities``) for every record of an input, sorted
        by component then side; records of other quantities are not in any."""
        names, codes = np.unique(quantities, return_inverse=True)
        found = []
        for code, quantity in enumerate(names.tolist()):
            for side, pattern in ((LEFT, self.left), (RIGHT, self.right)):
                component = pattern.component(quantity)
                if component is not None:
                    found.append((component, side, np.flatnonzero(codes == code)))
                    break
        return sorted(found, key=lambda item: (item[0], item[1]))
