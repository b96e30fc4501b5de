"""A node graph panel checked without Grafana: its instant Prometheus results turned into data
frames, its transformations applied and the node graph's data contract asserted, the way
Grafana 11's frontend does it (sources cited in docs/dashboards.md#the-pipeline-graph).

Only what the panels here use is modelled, and exactly: an instant query in ``time_series``
format gives one frame per series, ``Time`` and a ``Value`` field carrying the labels
(promlib's numeric-multi frames); "Labels to fields" (columns mode) turns each label into a
string field and names the value field after ``valueLabel``; "Merge" joins the frames on the
fields they all have; a transformation's ``filter`` (byRefId) restricts it to matching frames and
puts the others back. "Organize"/"Rename" set a field's *display name* only, which the node
graph does not read: modelled so that a panel relying on them fails here as it would there.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

#: Field names the node graph panel reads (grafana-data NodeGraphDataFrameFieldNames).
NODE_FIELDS = ("id", "title", "subtitle", "mainstat", "secondarystat", "color")
ARC_PREFIX = "arc__"
DETAIL_PREFIX = "detail__"


class ModelError(ValueError):
    """A panel that uses something this model does not know: its result cannot be predicted."""


@dataclasses.dataclass
class Field:
    name: str
    values: list[Any]
    labels: dict[str, str] | None = None
    #: what Organize/Rename set (config.displayName); the node graph ignores it
    display_name: str | None = None


@dataclasses.dataclass
class Frame:
    fields: list[Field]
    ref_id: str | None = None

    @property
    def length(self) -> int:
        return len(self.fields[0].values) if self.fields else 0

    def field(self, name: str) -> Field | None:
        """The first field of that name, as FieldCache.getFieldByName (case-insensitive, as
        getNodeFields lower-cases the names first)."""
        return next((f for f in self.fields if f.name.lower() == name), None)

    def field_exact(self, name: str) -> Field | None:
        """The first field named exactly ``name`` (FieldCache, as the merge and the frame
        categorisation look fields up)."""
        return next((f for f in self.fields if f.name == name), None)


def instant_frames(
    ref_id: str, series: Sequence[tuple[Mapping[str, str], float]], time_ms: int
) -> list[Frame]:
    """An instant query's answer in ``time_series`` format: one frame per series."""
    return [
        Frame([Field("Time", [time_ms]), Field("Value", [value], dict(labels))], ref_id)
        for labels, value in series
    ]


# ------------------------------------------------------------------------------ transformations
def _labels_to_fields(frames: list[Frame], options: Mapping[str, Any]) -> list[Frame]:
    if options.get("mode", "columns") != "columns" or options.get("keepLabels"):
        raise ModelError(f"labelsToFields options not modelled: {dict(options)}")
    value_label = options.get("valueLabel")
    result = []
    for frame in frames:
        fields: list[Field] = []
        unique: dict[str, list[str]] = {}
        for field in frame.fields:
            if field.labels is None:
                fields.append(field)
                continue
            plain = Field(field.name, field.values)
            fields.append(plain)
            for name, value in field.labels.items():
                if name == value_label:
                    plain.name = value
                    continue
                if value not in unique.setdefault(name, []):
                    unique[name].append(value)
        for name, values in unique.items():
            fields += [Field(name, [value] * frame.length) for value in values]
        result.append(Frame(fields, frame.ref_id))
    return result


def _merge(frames: list[Frame]) -> list[Frame]:
    """Rows of all frames on the union of their fields; rows whose fields common to every frame
    are equal (and whose other shared values agree) become one. The result has no refId."""
    data = [f for f in frames if f.fields]
    if len(frames) <= 1:
        return frames
    if not data:
        return frames[:1]
    names: list[str] = []
    for frame in data:
        names += [f.name for f in frame.fields if f.name not in names]
    key_names = [n for n in names if all(frame.field_exact(n) for frame in data)]
    if not key_names:
        return frames
    rows: list[dict[str, Any]] = []
    by_key: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for frame in data:
        for index in range(frame.length):
            row = {f.name: f.values[index] for f in frame.fields}
            key = tuple(row[n] for n in key_names)
            merged = False
            for existing in by_key.get(key, []):
                if all(existing.get(k) in (None, v) for k, v in row.items()):
                    existing.update(row)
                    merged = True
                    break
            if not merged:
                by_key.setdefault(key, []).append(row)
                rows.append(row)
    return [Frame([Field(n, [row.get(n) for row in rows]) for n in names])]


def _organize(frames: list[Frame], options: Mapping[str, Any]) -> list[Frame]:
    excluded = {n for n, on in (options.get("excludeByName") or {}).items() if on}
    renames = options.get("renameByName") or {}
    result = []
    for frame in frames:
        fields = []
        for field in frame.fields:
            shown = field.display_name or field.name
            if shown in excluded:
                continue
            fields.append(dataclasses.replace(field, display_name=renames.get(shown) or shown))
        result.append(Frame(fields, frame.ref_id))
    return result


def _matcher(config: Mapping[str, Any]) -> Any:
    """The frames a transformation's ``filter`` selects: byRefId, an exact name or a|b."""
    frame_filter = config.get("filter")
    if not frame_filter or not frame_filter.get("options"):
        return None
    if frame_filter.get("id") != "byRefId":
        raise ModelError(f"frame filter not modelled: {frame_filter}")
    pattern = str(frame_filter["options"])
    if pattern.startswith("/"):
        raise ModelError(f"refId regex filters are not modelled: {pattern}")
    accepted = set(pattern.split("|"))
    return lambda frame: frame.ref_id in accepted


def _put_back(before: list[Frame], after: list[Frame], matcher: Any) -> list[Frame]:
    """The frames a filter left out, spliced back in as postProcessTransform does: at the index
    of the first left-out frame, except that a first one at index 0 lets the next one decide."""
    insert = 0
    left_out = []
    for index, frame in enumerate(before):
        if not matcher(frame):
            if not insert:
                insert = index
            left_out.append(frame)
    return after[:insert] + left_out + after[insert:]


def apply_transformations(
    frames: list[Frame], transformations: Sequence[Mapping[str, Any]]
) -> list[Frame]:
    """The panel's transformations in order, skipping disabled ones."""
    for config in transformations:
        if config.get("disabled"):
            continue
        kind = config.get("id")
        options = config.get("options") or {}
        matcher = _matcher(config)
        selected = [f for f in frames if matcher(f)] if matcher else frames
        if kind == "labelsToFields":
            after = _labels_to_fields(selected, options)
        elif kind == "merge":
            after = _merge(selected)
        elif kind == "organize":
            after = _organize(selected, options)
        else:
            raise ModelError(f"transformation {kind!r} is not modelled")
        if matcher:
            after = _put_back(frames, after, matcher)
        frames = after
    return frames


# ------------------------------------------------------------------------------ the node graph
def categorize(frames: Sequence[Frame]) -> tuple[list[Frame], list[Frame]]:
    """(nodes, edges): frames with an ``id`` field (or named nodes/edges) reach the panel; a
    frame with a ``source`` field is edges, any other nodes (useCategorizeFrames)."""
    graph = [f for f in frames if f.ref_id in ("nodes", "edges") or f.field_exact("id")]
    edges = [f for f in graph if f.field_exact("source")]
    return [f for f in graph if not f.field_exact("source")], edges


def contract_problems(
    frames: Sequence[Frame], expected_nodes: Sequence[str] | None = None
) -> list[str]:
    """Why the node graph would not draw these frames as the pipeline (empty: it would).

    The panel uses only the first nodes frame and the first edges frame; each needs an ``id``;
    an edge whose source or target is no node id breaks the drawing; a node id given twice
    keeps only its last row. Here also: every node has a title, subtitle, numeric mainstat and
    secondarystat and arcs that add up to 1, and the nodes are ``expected_nodes`` in order.
    """
    nodes, edges = categorize(frames)
    problems = []
    if len(nodes) != 1 or len(edges) != 1:
        return [f"{len(nodes)} nodes frames and {len(edges)} edges frames, not one of each"]
    node_frame, edge_frame = nodes[0], edges[0]
    ids_field = node_frame.field("id")
    if ids_field is None or edge_frame.field("id") is None:
        return ["the nodes and the edges frame each need an 'id' field"]
    ids = [str(v) for v in ids_field.values]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        problems.append(f"node ids given more than once: {duplicated}")
    if expected_nodes is not None and ids != list(expected_nodes):
        problems.append(f"nodes {ids}, expected {list(expected_nodes)}")
    for name in ("title", "subtitle"):
        field = node_frame.field(name)
        if field is None or not all(isinstance(v, str) and v for v in field.values):
            problems.append(f"every node needs a {name}")
    for name in ("mainstat", "secondarystat"):
        field = node_frame.field(name)
        if field is None or not all(isinstance(v, int | float) for v in field.values):
            problems.append(f"every node needs a numeric {name}")
    arcs = [f for f in node_frame.fields if f.name.lower().startswith(ARC_PREFIX)]
    if not arcs:
        problems.append("no arc__ fields: the health ring would be grey")
    for row, node in enumerate(ids):
        values = [f.values[row] for f in arcs]
        if arcs and not (
            all(isinstance(v, int | float) for v in values) and math.isclose(sum(values), 1.0)
        ):
            problems.append(f"node {node}: arcs {values} do not add up to 1")
    sources, targets = edge_frame.field("source"), edge_frame.field("target")
    if sources is None or targets is None:
        return problems + ["the edges frame needs 'source' and 'target' fields"]
    edge_ids = [str(v) for v in edge_frame.field("id").values]  # type: ignore[union-attr]
    if len(set(edge_ids)) != len(edge_ids):
        problems.append(f"edge ids given more than once: {edge_ids}")
    for edge, source, target in zip(edge_ids, sources.values, targets.values, strict=True):
        missing = [end for end in (source, target) if end not in ids]
        if missing:
            problems.append(f"edge {edge}: {missing} is no node id")
    return problems


def panel_problems(
    panel: Mapping[str, Any],
    results: Mapping[str, Sequence[tuple[Mapping[str, str], float]]],
    time_ms: int,
    expected_nodes: Sequence[str] | None = None,
) -> list[str]:
    """The contract problems of a node graph panel given each target's instant result."""
    frames: list[Frame] = []
    for target in panel.get("targets") or []:
        if target.get("format", "time_series") != "time_series":
            raise ModelError(f"target {target.get('refId')}: only time_series format is modelled")
        frames += instant_frames(target["refId"], results.get(target["refId"], []), time_ms)
    transformed = apply_transformations(frames, panel.get("transformations") or [])
    return contract_problems(transformed, expected_nodes)
