"""The statistics' two inputs per component: ``actSpeed_*`` and ``vaTorque_*`` pair per suffix
(``operators.patterns``), found as records arrive, never listed in advance."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from operators.patterns import Pattern

#: f(left value, right value) -> power in W (a float, or numpy's; the join's result functions fit)
PowerFn = Callable[[float, float], float | np.floating | np.ndarray]

LEFT, RIGHT = 0, 1


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
