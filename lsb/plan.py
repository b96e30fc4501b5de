"""JOIN_PAIRS with patterns: a thing's pairs, grown as its components arrive.

``actSpeed_*:vaTorque_*`` joins, per thing, every component (the part ``*`` stands for) whose
speed or torque has arrived: ``actSpeed_C12`` with ``vaTorque_C12``, and so on, each pair
exact on its own and its results tagged with the component. A :class:`JoinPlan` is the
explicit pairs and the pattern pairs; :meth:`JoinPlan.config` is the concrete
:class:`JoinConfig` of the components a thing has shown, which is what its state is kept for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np

from operators.patterns import Pattern

from .config import JoinConfig, PairSpec
from .results import ResultFn, mechanical_power

#: how many configs (one per set of components) and names a plan remembers: a bound on memory
REMEMBERED = 4096


@dataclass(frozen=True)
class PatternPair:
    """One pair per component: ``left`` and ``right`` share the component their ``*`` stands
    for."""

    left: Pattern
    right: Pattern
    result: ResultFn = mechanical_power
    result_name: str = ""

    def __post_init__(self) -> None:
        if self.left == self.right:
            raise ValueError(f"a pair needs two different patterns, got {self.left.text!r} twice")
        if not self.result_name:
            object.__setattr__(self, "result_name", getattr(self.result, "__name__", "result"))

    def instance(self, component: str) -> PairSpec:
        return PairSpec(
            self.left.quantity(component),
            self.right.quantity(component),
            self.result,
            self.result_name,
            component,
        )


@dataclass(frozen=True)
class JoinPlan:
    """Explicit pairs and pattern pairs, with the policies every pair shares."""

    pairs: tuple[PairSpec, ...] = ()
    patterns: tuple[PatternPair, ...] = ()
    max_gap: timedelta | None = None
    allowed_disorder: timedelta = timedelta(0)
    partner_timeout: timedelta | None = None
    _configs: dict[tuple[str, ...], JoinConfig] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _components: dict[str, str | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if not self.pairs and not self.patterns:
            raise ValueError("at least one pair or pattern pair is needed")
        shapes = self.quantity_patterns
        for k, one in enumerate(shapes):
            for other in shapes[k + 1 :]:
                if one.overlaps(other):
                    raise ValueError(
                        f"the patterns {one.text!r} and {other.text!r} both match some names, "
                        "so a record's component would be ambiguous"
                    )
        for spec in self.pairs:
            for quantity in (spec.left, spec.right):
                matched = [p.text for p in shapes if p.component(quantity) is not None]
                if matched:
                    raise ValueError(
                        f"{quantity!r} is in an explicit pair and matched by the pattern "
                        f"{matched[0]!r}: list it once"
                    )
        self.config(())  # the explicit pairs' checks, at once

    @property
    def quantity_patterns(self) -> list[Pattern]:
        """Every distinct pattern of the pattern pairs, in the order written."""
        return list(dict.fromkeys(p for pair in self.patterns for p in (pair.left, pair.right)))

    @classmethod
    def of(cls, config: JoinConfig) -> JoinPlan:
        """The plan of a config without patterns."""
        return cls(
            config.pairs,
            (),
            config.max_gap,
            config.allowed_disorder,
            config.partner_timeout,
        )

    def config(self, components: tuple[str, ...]) -> JoinConfig:
        """The explicit pairs, then every pattern pair of each component (sorted)."""
        known = self._configs.get(components)
        if known is None:
            if len(self._configs) >= REMEMBERED:
                self._configs.clear()
            known = self._configs[components] = JoinConfig(
                pairs=self.pairs + tuple(p.instance(c) for c in components for p in self.patterns),
                max_gap=self.max_gap,
                allowed_disorder=self.allowed_disorder,
                partner_timeout=self.partner_timeout,
            )
        return known

    def component(self, quantity: str) -> str | None:
        """The component a pattern finds in ``quantity``; None if no pattern matches."""
        if quantity in self._components:
            return self._components[quantity]
        found = None
        for pair in self.patterns:
            found = pair.left.component(quantity) or pair.right.component(quantity)
            if found is not None:
                break
        if len(self._components) >= REMEMBERED:
            self._components.clear()
        self._components[quantity] = found
        return found

    def components_of(self, quantities: Iterable[str]) -> tuple[str, ...]:
        """The components the names show, sorted: what a state of them is kept for."""
        found = {self.component(q) for q in quantities} if self.patterns else set()
        return tuple(sorted(c for c in found if c is not None))

    def grown(self, config: JoinConfig, quantities: np.ndarray) -> JoinConfig:
        """``config`` with the components new in ``quantities`` (itself if none is new)."""
        if not self.patterns or not len(quantities):
            return config
        known = set(config.quantities)
        new = {
            c
            for c in (self.component(q) for q in set(quantities.tolist()) - known)
            if c is not None and c not in config.components
        }
        if not new:
            return config
        return self.config(tuple(sorted(set(config.components) | new)))

    def selects(self, quantities: np.ndarray) -> np.ndarray:
        """Which records the plan joins: a quantity of an explicit pair or one a pattern
        matches."""
        explicit = self.config(()).quantities
        if not self.patterns:
            return np.isin(quantities, explicit)
        names = set(np.asarray(quantities).tolist())
        wanted = [q for q in names if q in explicit or self.component(q) is not None]
        return np.isin(quantities, wanted)


__all__ = ["JoinPlan", "PatternPair"]
