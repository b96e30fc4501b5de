"""The operation statistics beside the join, without Spark: the settings, where they run, the
rendering of cycles and handed-back records, the Kafka records the driver writes for them, and
the points the connector makes of those records."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Message

from db_connector.lineprotocol import PointError
from db_connector.points import opstats_converter, overload_converter
from operators import Records
from operators.keyed import KeyedStates
from opstats import CatalogueError
from spark_jobs import operation_stats, outputs, passes, renderers, single_pass
from spark_jobs.config import JoinSettings, SinglePassSettings
from spark_jobs.driver_outputs import KafkaOutputs
from spark_jobs.output_columns import OutputRows
from streamkit.errors import EXIT_USAGE, ConfigError
from streamkit.paths import REPO_ROOT
from streamkit.wire import AvroCodec, cycle_key, overload_key, thing_partition
from streamkit.wire.registry import frame

CATALOGUE = REPO_ROOT / "examples" / "machine-catalogue.yaml"
POWER = "actSpeed_*:vaTorque_*:mechanical_power"


def message(value: bytes) -> Message:
    return Message(topic="o", partition=0, offset=0, key=b"k", value=value, timestamp=(1, 0))


def settings(**cli: str) -> SinglePassSettings:
    return SinglePassSettings.from_sources(
        environ={}, cli={"opstats_power": POWER, "machine_catalogue": str(CATALOGUE), **cli}
    )


def test_on_by_default_off_when_empty_and_any_power() -> None:
    default = operation_stats.stats_config(SinglePassSettings.from_sources(environ={}, cli={}))
    assert default is not None and default.inputs.left.text == "actSpeed_*"
    assert not default.catalogue.entries  # the built-in rating for every component
    empty = SinglePassSettings.from_sources(environ={"OPSTATS_POWER": ""}, cli={})
    assert operation_stats.stats_config(empty) is None
    config = operation_stats.stats_config(settings(opstats_cycle="5min", opstats_max_hold="30s"))
    assert config is not None
    assert (config.inputs.left.text, config.inputs.right.text, config.inputs.name) == (
        "actSpeed_*",
        "vaTorque_*",
        "mechanical_power",
    )
    assert config.rules().cycle_ms == 300_000 and config.rules().max_hold_ms == 30_000
    assert config.catalogue.rating("R0815", "C11").duty_rating_pct == 60
    waiting = operation_stats.stats_config(settings(opstats_partner_timeout="off"))
    assert waiting is not None and waiting.rules().partner_timeout_ms is None


@pytest.mark.parametrize(
    "power", ["actSpeed_C11", "a:b:c:d", "speed:torque_*", "speed_*:torque_*:nothing", "x_*:x_*"]
)
def test_a_bad_power_setting_names_the_variable(power: str) -> None:
    with pytest.raises(ConfigError, match="OPSTATS_POWER"):
        operation_stats.stats_config(settings(opstats_power=power))


def test_a_bad_catalogue_stops_the_start_with_exit_code_2(tmp_path: Path) -> None:
    bad = tmp_path / "machines.yaml"
    bad.write_text("machines:\n  - {thing: A, component: C1, rated_power_kw: -1}\n")
    with pytest.raises(CatalogueError, match=f"{bad}:2: rated_power_kw") as caught:
        single_pass.check(settings(machine_catalogue=str(bad)))
    assert caught.value.exit_code == EXIT_USAGE


@pytest.mark.parametrize("state", ["driver", "executors"])
def test_the_statistics_run_wherever_the_state_lives_and_beside_the_join_job(state: str) -> None:
    where = settings(state=state, sink=state)
    single_pass.check(where)
    parts = passes.thing_operator(where, passes.join_plan(where)).parts
    assert [name for name, _, _ in parts] == ["join", "aggregate", "opstats"]
    assert ("avro_value", "binary") in passes.output_fields(where)
    off = settings(opstats_power="")
    assert [n for n, _, _ in passes.thing_operator(off, passes.join_plan(off)).parts] == [
        "join",
        "aggregate",
    ]
    assert passes.output_fields(off) == renderers.SINGLE_PASS_FIELDS
    job = JoinSettings.from_sources(
        environ={}, cli={"opstats_power": POWER, "machine_catalogue": str(CATALOGUE)}
    )
    function = passes.join_pass(job)
    # the thing's parts behind its limit of names, behind its retention
    assert [n for n, _, _ in function.operator.inner.inner.parts] == ["join", "opstats"]  # type: ignore[attr-defined]
    assert function.fields == renderers.JOIN_WITH_STATISTICS
    alone = passes.join_pass(JoinSettings.from_sources(environ={}, cli={"opstats_power": ""}))
    assert alone.fields == renderers.JOIN_WITH_STAGE
    assert [n for n, _, _ in alone.operator.inner.inner.parts] == ["join"]  # type: ignore[attr-defined]


def rendered(s: SinglePassSettings, header: bytes = b"") -> OutputRows:
    """Two components of a thing, a copy handed back, then the end of their stream."""
    table = KeyedStates(passes.thing_operator(s, passes.join_plan(s)))
    render = renderers.thing_rows(renderers.StatsRows(header, b""))
    out = OutputRows(passes.output_fields(s), renderers.NULLABLE)
    rows = []
    for t in range(0, 1_300_000, 10_000):
        for component, speed in (("C11", 2000.0), ("C12", -1500.0)):
            rows += [(f"actSpeed_{component}", t, speed), (f"vaTorque_{component}", t, 20.0)]
    rows.append(("vaTorque_C11", 0, 20.0))  # a straggler: late, for every stage
    quantities, times, values = zip(*rows, strict=True)
    records = Records.of(quantities, times, values, [f"r{k}" for k in range(len(rows))])
    now = int(time.time() * 1000)
    for key, batch, emitted in table.step([("M0001", records)], now).emitted:
        render(out, (key,), batch, emitted, {})
    return out


def test_cycles_become_kafka_records_the_connector_turns_into_points() -> None:
    s = settings()
    header = frame(7)
    out = rendered(s, header)
    assert out.count(outputs.OPSTATS) == 2 * 2  # two closed cycles per component
    late = out.columns("late", ["stage", "reason", "quantity"])
    assert ("opstats", "behind_watermark", "vaTorque_C11") in set(
        zip(late["stage"], late["reason"], late["quantity"], strict=True)
    )
    topics = {
        outputs.JOINED: "j",
        outputs.AGGREGATE: "a",
        outputs.LATE: "l",
        outputs.OPSTATS: "o",
        outputs.OVERLOAD: "e",
    }
    writer = KafkaOutputs(
        topics,
        {kind: 3 for kind in topics},
        {},
        dlq_topic="d",
        dlq_partitions=1,
        source_topic="r",
        stage="single_pass",
    )
    cycles = [r for r in writer.rows(out) if r[0] == "o"]
    assert len(cycles) == 4
    codec = AvroCodec("opstats")
    convert = opstats_converter()
    for _, key, value, partition, headers in cycles:
        assert headers is None and value is not None
        assert value.startswith(header) and partition == thing_partition("M0001", 3)
        record = codec.decode(value[len(header) :])
        assert key == cycle_key(
            "M0001", record["component"], record["rating_id"], record["cycle_start_ms"]
        )
        spindle = record["component"] == "C11"
        assert record["rated_power_kw"] == (15.0 if spindle else 4.0)
        assert record["band_names"][-1] == "over-100"
        assert sum(record["band_ms"]) == record["data_ms"] == 600_000
        # 2000 rpm x 20 Nm = 4.19 kW: 27.9 % of the spindle's 15 kW; -1500 rpm x 20 Nm:
        # 78.5 % of the axis' 4 kW, braking, in the axis' top band 75-100
        assert record["band_ms"][1 if spindle else -2] == 600_000
        assert (record["regenerative_kwh"] > 0) == (not spindle)
        lines = convert(message(value[len(header) :])).split("\n")
        assert len(lines) == 1 + len(record["band_names"])
        assert lines[0].startswith(
            f"opstats,component={record['component']},power=mechanical_power,"
            f"rating={record['rating_id']},thing=M0001 "
        )
        assert f" {record['cycle_start_ms'] * 1_000_000}" in lines[0]
        assert f"duty_exceeded={0 if spindle else 1}i" in lines[0]
        assert all(line.startswith("opstats_band,band=") for line in lines[1:])
    # the axis runs at its full load from the start: one alert, fired by its first cycle and
    # never resolved; the spindle stays under its rating
    (event,) = [r for r in writer.rows(out) if r[0] == "e"]
    _, key, value, partition, _ = event
    assert key == overload_key("M0001", "C12") and partition == thing_partition("M0001", 3)
    fired = AvroCodec("overload").decode(value or b"")
    assert (fired["status"], fired["why"], fired["since_ms"]) == ("firing", "duty", 0)
    assert fired["cycle_start_ms"] == 0 and fired["duty_pct"] == 100.0
    (point,) = overload_converter()(message(value or b"")).split("\n")
    assert point.startswith(
        f"overload,component=C12,rating={fired['rating_id']},status=firing,thing=M0001 "
    )
    assert 'why="duty"' in point and point.endswith(" 0")


def test_the_connector_refuses_a_cycle_it_cannot_make_points_of() -> None:
    codec = AvroCodec("opstats")
    good = {
        "thing": "M1",
        "component": "C11",
        "power_name": "mechanical_power",
        "rating_id": "abc",
        "cycle_start_ms": 0,
        "cycle_end_ms": 600_000,
        "rated_power_kw": 20.0,
        "duty_rating_pct": 40.0,
        "rating_defaulted": True,
        "band_names": ["0-50", "50-100", "over-100"],
        "band_ms": [1, 2, 3],
        "cumulative_ms": [1, 2, 3],
        "data_ms": 6,
        "duty_pct": 83.3,
        "motoring_kwh": 0.1,
        "regenerative_kwh": 0.0,
        "mean_w": 5.0,
        "peak_w": 6.0,
    }
    convert = opstats_converter()
    assert convert(message(codec.encode(good))).count("\n") == 3
    for bad in (
        {"rated_power_kw": 0.0},
        {"band_ms": [1, 2]},
        {"data_ms": 700_000},
        {"component": ""},
        {"thing": "a|b"},
        {"mean_w": float("nan")},
    ):
        with pytest.raises(PointError):
            convert(message(codec.encode({**good, **bad})))
    with pytest.raises(PointError) as caught:
        convert(message(b"\x01\x02"))
    assert caught.value.reason == "undecodable"


def test_a_component_with_the_default_rating_is_said_once_in_the_log_and_a_metric(
    caplog: pytest.LogCaptureFixture,
) -> None:
    operation_stats._said.clear()
    before = operation_stats.DEFAULTED._value.get()
    with caplog.at_level("WARNING", logger="spark_jobs.operation_stats"):
        rendered(settings(machine_catalogue=""))
        rendered(settings(machine_catalogue=""))
        rendered(settings())  # the catalogue names both components: nothing to say
    assert operation_stats.DEFAULTED._value.get() - before == 2
    said = [(r.thing, r.component) for r in caplog.records]  # type: ignore[attr-defined]
    assert sorted(said) == [("M0001", "C11"), ("M0001", "C12")]
