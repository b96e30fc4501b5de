"""Quantity names with one ``*``: ``actSpeed_*`` stands for every drive's speed.

A component is one drive of a machine (a spindle, an axis); in the data it is the part of a
quantity's name a ``*`` stands for, e.g. ``C12`` in ``actSpeed_C12``. The join's pattern pairs
and the operation statistics both find components this way, as records arrive, so a machine
with a new axis needs no setting.
"""

from __future__ import annotations

from dataclasses import dataclass


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

    def overlaps(self, other: Pattern) -> bool:
        """Whether some name matches both (then a record's component would be ambiguous)."""
        return (self.prefix.startswith(other.prefix) or other.prefix.startswith(self.prefix)) and (
            self.suffix.endswith(other.suffix) or other.suffix.endswith(self.suffix)
        )


def is_pattern(name: str) -> bool:
    """Whether a configured name is a pattern rather than one quantity."""
    return "*" in name
