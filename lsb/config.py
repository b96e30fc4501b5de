"""Join configuration: which quantity pairs to join per key and with which policies.

One config describes every pair of a key, so a single per-key state value can
hold them all (one binary value per key in the Spark state store). With pattern
pairs (``lsb.plan``) a key's config grows by each component it shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from operators.time import END_TIME, NO_TIME, to_ms

from .results import ResultFn, mechanical_power


@dataclass(frozen=True)
class PairSpec:
    """One joined pair of quantities, e.g. speed (left) with torque (right)."""

    left: str
    right: str
    result: ResultFn = mechanical_power
    #: Name of the result in outputs; defaults to the function's name.
    result_name: str = ""
    #: The component a pattern pair found (``lsb.plan``); empty for an explicit pair.
    component: str = ""

    def __post_init__(self) -> None:
        if self.left == self.right:
            raise ValueError(f"a pair needs two different quantities, got {self.left!r} twice")
        if not self.result_name:
            object.__setattr__(self, "result_name", getattr(self.result, "__name__", "result"))

    @property
    def name(self) -> str:
        return f"{self.left}~{self.right}"


@dataclass(frozen=True)
class JoinConfig:
    """All pairs joined per key, plus the optional filters and policies.

    ``max_gap``: only pairs with ``|left_time - right_time| <= max_gap``.
    ``allowed_disorder``: size of the per-stream reorder stage; 0 means the
    strict default policy (anything not newer than the stream's last record is late).
    ``partner_timeout``: once one stream is this far (event time) past the last
    record of its partner, the partner's older records are treated as late, which
    makes the pending pairs of the advanced stream certain.

    The kernels compare int64 event times, so each is also held in whole milliseconds
    (``max_gap_ms``, ...), converted and checked once here.
    """

    pairs: tuple[PairSpec, ...]
    max_gap: timedelta | None = None
    allowed_disorder: timedelta = timedelta(0)
    partner_timeout: timedelta | None = None
    quantities: tuple[str, ...] = field(init=False)
    #: The components of the pattern pairs it holds, sorted (``lsb.plan``).
    components: tuple[str, ...] = field(init=False)
    max_gap_ms: int | None = field(init=False, repr=False, compare=False)
    allowed_disorder_ms: int = field(init=False, repr=False, compare=False)
    partner_timeout_ms: int | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        pairs = tuple(self.pairs)
        names = [p.name for p in pairs]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate pairs in {names}")
        for name in ("max_gap", "allowed_disorder", "partner_timeout"):
            duration = getattr(self, name)
            whole = None if duration is None else to_ms(duration, what=name, allow_zero=True)
            object.__setattr__(self, f"{name}_ms", whole)
        quantities: list[str] = []
        for p in pairs:
            for q in (p.left, p.right):
                if q not in quantities:
                    quantities.append(q)
        object.__setattr__(self, "pairs", pairs)
        object.__setattr__(self, "quantities", tuple(quantities))
        object.__setattr__(
            self, "components", tuple(sorted({p.component for p in pairs if p.component}))
        )
        # Looked up once per record on the per-record path, so precomputed.
        object.__setattr__(self, "_codes", {q: i for i, q in enumerate(quantities)})
        object.__setattr__(
            self,
            "_pair_codes",
            tuple((quantities.index(p.left), quantities.index(p.right)) for p in pairs),
        )

    @classmethod
    def single(
        cls, left: str, right: str, result: ResultFn = mechanical_power, **kw: object
    ) -> JoinConfig:
        """Shortcut for the common one-pair config."""
        return cls(pairs=(PairSpec(left, right, result),), **kw)  # type: ignore[arg-type]

    def quantity_code(self, name: str) -> int:
        """Index of a quantity in :attr:`quantities`, -1 if the config does not use it."""
        return self._codes.get(name, -1)  # type: ignore[attr-defined]

    def pair_codes(self) -> tuple[tuple[int, int], ...]:
        """(left code, right code) per pair, in config order."""
        return self._pair_codes  # type: ignore[attr-defined]


__all__ = ["NO_TIME", "END_TIME", "PairSpec", "JoinConfig"]
