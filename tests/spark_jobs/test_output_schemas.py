"""The aggregate's Avro value is built from the state functions' columns by the schema's field
names (``outputs.schema_fields``): every field must be a column of both shapes, of its type, and
an optional long must be a nullable column (no Spark needed to check that)."""

from __future__ import annotations

import json

from spark_jobs import renderers
from spark_jobs.outputs import schema_fields
from streamkit.wire import schema_text


def test_every_aggregate_field_is_an_output_column_of_its_type() -> None:
    fields = json.loads(schema_text("aggregate"))["fields"]
    assert schema_fields("aggregate") == [f["name"] for f in fields]
    assert (
        schema_fields("aggregate")[-1] == "closed_at_ms"
    )  # added last: older records resolve to null
    for columns in (dict(renderers.WINDOW_FIELDS), dict(renderers.SINGLE_PASS_FIELDS)):
        for f in fields:
            optional = isinstance(f["type"], list)
            kind = f["type"][1] if optional else f["type"]
            assert columns[f["name"]] == kind, f["name"]
            if optional and kind == "long":
                assert f["name"] in renderers.NULLABLE, f[
                    "name"
                ]  # a double's NaN reaches Spark as null
