"""The schema registry's wire format (streamkit.wire.registry): the 5-byte header, the off path
unchanged, and, on the real registry (Apicurio in the local stack), registration under the
compatibility rule: a breaking change refused with the subject named."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Message

from db_connector.points import PointError, converters_for
from mqtt_bridge.records import RowSplitter
from stacktools.harness.processes import ServiceProcess
from stacktools.harness.services import SERVICES
from stacktools.harness.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.servers.registry import SchemaRegistry, schema_registry
from stacktools.stack.settings import Settings
from streamkit.events import parse_row
from streamkit.wire import AvroCodec, schema_text
from streamkit.wire.registry import (
    IncompatibleSchema,
    RegistryClient,
    frame,
    header,
    register_all,
    subject,
    unframe,
)

ROW = parse_row(b'{"Thing": "T1", "Timestamp": 1554000000000, "a": 1.5, "b": -2.0}')


def test_frame_is_magic_byte_and_big_endian_id() -> None:
    assert frame(1) == b"\x00\x00\x00\x00\x01"
    assert frame(0x01020304) == b"\x00\x01\x02\x03\x04"
    assert unframe(frame(258) + b"body") == (258, b"body")


@pytest.mark.parametrize("value", [b"", b"\x00\x00\x01", b"\x01\x00\x00\x00\x01body"])
def test_unframe_refuses_values_without_the_header(value: bytes) -> None:
    with pytest.raises(ValueError, match="magic byte"):
        unframe(value)


def settings_with(registry: bool) -> Settings:
    return dataclasses.replace(Settings.from_sources(), schema_registry=registry)


def test_off_path_writes_plain_avro() -> None:
    settings = settings_with(False)
    assert header(settings, settings.raw_topic, "measurement") == b""
    plain = RowSplitter(4).batch(ROW)
    assert RowSplitter(4, header=b"").batch(ROW) == plain
    codec = AvroCodec("measurement")
    assert [codec.decode(r["value"])["quantity"] for r in plain[1]] == ["a", "b"]


def test_bridge_frames_every_record_with_the_header() -> None:
    partition, plain = RowSplitter(4).batch(ROW)
    framed_partition, framed = RowSplitter(4, header=frame(7)).batch(ROW)
    assert framed_partition == partition
    assert [r["key"] for r in framed] == [r["key"] for r in plain]
    assert [unframe(r["value"]) for r in framed] == [(7, r["value"]) for r in plain]


def test_connector_reads_framed_values_and_refuses_unframed() -> None:
    settings = settings_with(True)
    plain_convert, _ = converters_for(["raw"], settings_with(False))[settings.raw_topic]
    convert, _ = converters_for(["raw"], settings)[settings.raw_topic]
    value = RowSplitter(4).batch(ROW)[1][0]["value"]
    message = Message(value=frame(3) + value)
    assert convert(message) == plain_convert(Message(value=value))
    assert message.value() == frame(3) + value  # left as it came, for a dead letter
    with pytest.raises(PointError, match="magic byte"):
        convert(Message(value=value))


# --------------------------------------------------------------------------- the real registry
@pytest.fixture(scope="module")
def registry_settings(stack_settings: Settings) -> Iterator[Settings]:
    """The stack's schema registry (started here unless it runs; stopped again if so)."""
    settings = dataclasses.replace(stack_settings, schema_registry=True)
    stack = Stack(settings, ["schema-registry"])
    started = stack.groups_not_running()
    stack.up()
    yield settings
    if started:
        stack.down()


def _schema(fields: list[dict]) -> str:
    return json.dumps({"type": "record", "name": "Probe", "namespace": "t", "fields": fields})


@pytest.mark.stack
def test_registered_schemas_keep_their_id_and_rule(registry_settings: Settings) -> None:
    ids = register_all(registry_settings)
    assert register_all(registry_settings) == ids  # idempotent
    client = RegistryClient(registry_settings)
    for topic, schema_id in ids.items():
        status, latest = client.call("GET", f"/subjects/{subject(topic)}/versions/latest")
        assert status == 200 and latest["id"] == schema_id
        assert json.loads(latest["schema"]) == json.loads(schema_text(latest_name(topic)))
        assert client.call("GET", f"/config/{subject(topic)}")[1] == {
            "compatibilityLevel": "BACKWARD"
        }


def latest_name(topic: str) -> str:
    return {
        "raw": "measurement",
        "joined": "joined",
        "aggregates": "aggregate",
        "late": "late",
        "opstats": "opstats",
        "overloads": "overload",
    }[topic.split(".")[1]]


@pytest.mark.stack
def test_incompatible_change_is_refused_naming_the_subject(registry_settings: Settings) -> None:
    client = RegistryClient(registry_settings)
    name = f"test-{uuid.uuid4().hex[:8]}-value"
    first = client.register(name, _schema([{"name": "a", "type": "string"}]))
    # a new field with a default reads the old records: accepted as a new version
    second = client.register(
        name,
        _schema([{"name": "a", "type": "string"}, {"name": "b", "type": "long", "default": 0}]),
    )
    assert second != first
    # a new field without a default cannot read them: refused, the subject named
    with pytest.raises(IncompatibleSchema, match=f"subject {name}: .*BACKWARD"):
        client.register(
            name,
            _schema(
                [
                    {"name": "a", "type": "string"},
                    {"name": "b", "type": "long", "default": 0},
                    {"name": "c", "type": "long"},
                ]
            ),
        )


@pytest.mark.stack
def test_producer_start_up_refuses_our_schema_after_an_incompatible_version(
    registry_settings: Settings,
) -> None:
    """A raw topic whose subject holds a version our measurement schema cannot read (its value
    a string): the header a producer asks for at start-up is refused."""
    topic = f"test.raw.{uuid.uuid4().hex[:8]}"
    old = json.loads(schema_text("measurement"))
    old["fields"] = [{**f, "type": "string"} if f["name"] == "value" else f for f in old["fields"]]
    RegistryClient(registry_settings).register(subject(topic), json.dumps(old))
    settings = dataclasses.replace(registry_settings, raw_topic=topic)
    with pytest.raises(IncompatibleSchema, match=f"subject {topic}-value"):
        header(settings, topic, "measurement")


def test_the_stack_runs_the_registry_only_when_on(tmp_path: Path) -> None:
    """Off: no registry component; on: HTTPS only with the stack's certificate, H2 in a file
    under the run dir, nothing secret on its command line or in its configuration."""
    off = dataclasses.replace(settings_with(False), run_dir=tmp_path)
    assert "schema-registry" not in Stack(off).names
    on = dataclasses.replace(off, schema_registry=True, schema_registry_port=18181)
    assert "schema-registry" in Stack(on).names
    (registry,) = schema_registry(on)
    command = registry.command()
    # its configuration is a file Quarkus reads as one more source (the one compose reads too)
    source = f"-Dquarkus.config.locations={registry.conf_dir / SchemaRegistry.PROPERTIES}"
    assert source in command
    rendered = registry.config_files(registry.site)[SchemaRegistry.PROPERTIES].decode()
    properties = dict(line.split("=", 1) for line in rendered.splitlines())
    assert properties["quarkus.http.host"] == "127.0.0.1"
    assert properties["quarkus.http.ssl-port"] == "18181"
    assert properties["quarkus.http.insecure-requests"] == "disabled"
    assert properties["quarkus.http.ssl.certificate.files"] == str(tmp_path / "tls" / "server.pem")
    assert properties["apicurio.datasource.url"] == (
        f"jdbc:h2:file:{tmp_path / 'data' / 'schema-registry' / 'registry'}"
    )
    assert not any("password" in a.lower() for a in command + rendered.splitlines())
    plain_registry = schema_registry(dataclasses.replace(on, tls=False))[0]
    plain_file = plain_registry.config_files(plain_registry.site)[SchemaRegistry.PROPERTIES]
    assert b"quarkus.http.ssl-port" not in plain_file
    plain = dataclasses.replace(on, tls=False)
    assert plain.registry_url == "http://127.0.0.1:18181/apis/ccompat/v7"


@pytest.mark.stack
def test_ids_survive_a_restart_of_the_registry(registry_settings: Settings) -> None:
    """The H2 file keeps every schema: records already in Kafka keep decoding."""
    before = register_all(registry_settings)
    stack = Stack(registry_settings, ["schema-registry"])
    assert stack.down() == ["schema-registry"]
    stack.up()
    assert register_all(registry_settings) == before


@pytest.mark.stack
def test_the_bridge_refuses_to_start_on_an_incompatible_subject(
    registry_settings: Settings, tmp_path: Path
) -> None:
    """The real service: exit 1 before it subscribes, one line naming the subject."""
    lane = Wiring.private(registry_settings, bridge_only=True)
    old = json.loads(schema_text("measurement"))
    old["fields"] = [{**f, "type": "string"} if f["name"] == "value" else f for f in old["fields"]]
    RegistryClient(registry_settings).register(subject(lane.raw), json.dumps(old))
    bridge = ServiceProcess(
        "mqtt_bridge",
        [
            *SERVICES["mqtt_bridge"].args(lane, tmp_path),
            "--metrics-port",
            "0",
        ],
        tmp_path / "bridge.log",
        registry_settings.as_environment(),
    ).start()
    assert bridge.popen.wait(120) == 1
    log = (tmp_path / "bridge.log").read_text()
    assert f"subject {lane.raw}-value" in log and "BACKWARD" in log, log[-2000:]
    assert SERVICES["mqtt_bridge"].ready_line not in log
