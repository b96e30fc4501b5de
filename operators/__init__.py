"""The keyed-operator contract the join (``lsb``) and the windows (``windowing``) implement.

Pure (numpy only, no Spark): the contract (:mod:`operators.contract`), the one versioned state
encoding (:mod:`operators.codec`), the time sentinels and typed durations
(:mod:`operators.time`), the component patterns of quantity names (:mod:`operators.patterns`),
the reasons a record is handed back (:mod:`operators.reasons`), the
compositions the single pass is built from (:mod:`operators.compose`), the bound on a key's
quantity names (:mod:`operators.limit`) and the drop of a silent key
(:mod:`operators.retention`). ``docs/operators.md``.
"""

from operators import reasons
from operators.codec import VERSION, Reader, Writer
from operators.compose import ByQuantity, Emitted, Together
from operators.contract import Driven, KeyedOperator, drive, due
from operators.errors import StateFormatError, StateVersionError
from operators.limit import QuantityLimit
from operators.patterns import Pattern, is_pattern
from operators.records import Records
from operators.retention import Retention
from operators.time import END_TIME, NO_TIME, ms, to_ms

__all__ = [
    "END_TIME",
    "NO_TIME",
    "Pattern",
    "QuantityLimit",
    "VERSION",
    "ByQuantity",
    "Driven",
    "Emitted",
    "KeyedOperator",
    "Reader",
    "Records",
    "Retention",
    "StateFormatError",
    "StateVersionError",
    "Together",
    "Writer",
    "drive",
    "due",
    "is_pattern",
    "ms",
    "reasons",
    "to_ms",
]
