"""What the run's InfluxDB database holds, per measurement as a DataFrame with the columns of the
expectation (stacktools.verify.expect): tags, fields and the time in ns.

One query per (measurement, Thing), several at a time, answered as CSV (a fraction of JSON's
parsing time for millions of points).
"""

from __future__ import annotations

import io
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from stacktools.stack.errors import InfluxError
from stacktools.stack.influx import InfluxClient, basic_auth
from stacktools.verify.expect import Expectation
from stacktools.verify.points import (
    KEYS,
    MEASUREMENTS,
    NS_PER_MS,
    STATS_MEASUREMENTS,
    TEXT_VALUES,
    VALUES,
)
from streamkit.wire.retention import source

#: Tags compared as text, in every measurement that has them.
TAGS = (
    "thing",
    "quantity",
    "pair",
    "window",
    "stage",
    "reason",
    "component",
    "rating",
    "band",
    "status",
)

PARALLEL_QUERIES = 4


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class InfluxReader:
    """The run's database as a source (stacktools.verify.source): one point per record identity
    at most, as written, compared with the expectation as it is."""

    label = "InfluxDB"

    def __init__(self, client: InfluxClient, database: str) -> None:
        self.client, self.database = client, database

    def compared(
        self, measurement: str, expectation: Expectation, found: pd.DataFrame
    ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
        return expectation.frames[measurement], found, KEYS[measurement]

    def notes(self) -> dict[str, str]:
        return {}

    def csv(self, statement: str) -> pa.Table | None:
        s = self.client.settings
        body = urllib.parse.urlencode({"q": statement, "db": self.database, "epoch": "ns"})
        request = urllib.request.Request(f"{s.influx_base_url}/query", data=body.encode())
        request.add_header(
            "Authorization", basic_auth(s.influx_username, s.influx_password.reveal())
        )
        request.add_header("Accept", "application/csv")
        try:
            with urllib.request.urlopen(
                request, timeout=600, context=self.client.tls_context
            ) as response:
                data = response.read()
        except urllib.error.HTTPError as exc:
            raise InfluxError(f"{statement}: {exc.code} {exc.read()[:300]!r}") from None
        except urllib.error.URLError as exc:
            raise InfluxError(f"InfluxDB at {s.influx_base_url}: {exc.reason}") from None
        if not data.strip():
            return None
        if data.startswith(b"{"):  # an error is answered as JSON
            raise InfluxError(f"{statement}: {data[:300]!r}")
        table = pa_csv.read_csv(
            io.BytesIO(data),
            convert_options=pa_csv.ConvertOptions(
                column_types={"time": pa.int64()},
                strings_can_be_null=True,
                auto_dict_encode=True,  # tags repeat: categoricals, compared by code
                auto_dict_max_cardinality=1 << 20,
            ),
        )
        return table

    def things(self, measurement: str) -> list[str]:
        found = self.client.rows(
            self.database, f'SHOW TAG VALUES FROM {source(measurement)} WITH KEY = "thing"'
        )
        return [row["value"] for row in found]

    def tag_keys(self, measurement: str) -> set[str]:
        found = self.client.rows(self.database, f"SHOW TAG KEYS FROM {source(measurement)}")
        return {row["tagKey"] for row in found}

    def measurement(self, measurement: str) -> pd.DataFrame:
        """Every point of one measurement: KEYS, VALUES and ``extra_tags`` (tags the schema does
        not have, as text: a point with one is a second series of the same record)."""
        things = self.things(measurement)
        tags = self.tag_keys(measurement)
        statements = [
            f'SELECT * FROM {source(measurement)} WHERE "thing" = {_quote(thing)}'
            for thing in things
        ]
        with ThreadPoolExecutor(PARALLEL_QUERIES) as pool:
            tables = [t for t in pool.map(self.csv, statements) if t is not None and t.num_rows]
        if not tables:
            return pd.DataFrame(columns=[*KEYS[measurement], *VALUES[measurement], "extra_tags"])
        # one set of categories for the whole measurement (a column absent in a part: null)
        table = pa.concat_tables(tables, promote_options="permissive").unify_dictionaries()
        return shaped(measurement, table.combine_chunks().to_pandas(), tags)

    def read(self, measurements: tuple[str, ...] = MEASUREMENTS) -> dict[str, pd.DataFrame]:
        return {m: self.measurement(m) for m in measurements}


def _text(column: pd.Series) -> pd.Series:
    """A tag column as a categorical of text (absent: empty)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        column = column.cat.add_categories([""]) if "" not in column.cat.categories else column
        return column.fillna("")
    return column.fillna("").astype(str).astype("category")


def shaped(measurement: str, found: pd.DataFrame, tags: set[str]) -> pd.DataFrame:
    """The CSV's columns as the expectation names them; the identity's times from the point."""
    out = pd.DataFrame({"time_ns": found["time"].astype(np.int64)})
    known = {"name", "tags", "time"}
    for column in found.columns:
        if column not in known:
            out[column] = found[column]
    for name in (*KEYS[measurement], *VALUES[measurement]):
        if name not in out.columns and name not in ("time_ms", "start_ms"):
            out[name] = np.nan
    time_ms = out["time_ns"] // NS_PER_MS
    if measurement in ("raw", "late"):
        out["time_ms"] = time_ms
    if measurement == "aggregate" or measurement in STATS_MEASUREMENTS:
        out["start_ms"] = time_ms
    if measurement == "joined":
        out["long_gap_ms"] = pd.to_numeric(out["long_gap_ms"].astype(object), errors="coerce")
    for name in (*TAGS, *TEXT_VALUES):
        if name in out.columns:
            out[name] = _text(out[name])
    schema_tags = set(KEYS[measurement]) | {"long_gap_ms", *TEXT_VALUES}
    others = sorted((tags & set(found.columns)) - schema_tags)
    if others:
        text = found[others].astype(object).fillna("").astype(str)
        out["extra_tags"] = text.apply(
            lambda r: ",".join(f"{k}={v}" for k, v in r.items() if v), axis=1
        )
        out["extra_tags"] = out["extra_tags"].astype("category")
    else:
        out["extra_tags"] = pd.Categorical.from_codes(np.zeros(len(out), np.int8), [""])
    return out
