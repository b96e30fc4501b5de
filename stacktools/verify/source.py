"""Where verify reads the run's output: one comparison, several readers.

A source yields, per measurement, a DataFrame with the columns of the expectation
(stacktools.verify.expect: KEYS and VALUES), and says how its records pair with the expected
ones: a store may carry less than the points (the topics carry no sub-millisecond time) or keep
what another overwrites (a topic keeps every copy of an identity, InfluxDB the last).
"""

from __future__ import annotations

from typing import Protocol

import pandas as pd

from stacktools.verify.expect import Expectation


class Source(Protocol):
    #: How the report names it: "InfluxDB", "the Kafka topics".
    label: str

    def read(self, measurements: tuple[str, ...]) -> dict[str, pd.DataFrame]:
        """Every point or record of each of ``measurements`` (stacktools.verify.expect)."""
        ...

    def compared(
        self, measurement: str, expectation: Expectation, found: pd.DataFrame
    ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
        """(expected, found, identity) as this source is compared: the expectation reduced to
        what the source carries, and the identity records are matched by."""
        ...

    def notes(self) -> dict[str, str]:
        """Per measurement, what the last read set aside under the source's semantics."""
        ...
