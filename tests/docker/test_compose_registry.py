"""docker-compose.yml's `registry` profile for real: the schema registry starts healthy over HTTPS
with the certs job's certificate, the bridge (given SCHEMA_REGISTRY=true by .env, as a user
turns it on) writes Confluent's wire format, and a registry-aware client that knows only the
registry's URL and the CA decodes the raw topic to exactly what the replayed rows imply.

Only the servers the bridge needs and the registry run (no Spark, no connector), so the round
stays short; the whole pipeline's framing is tested on the local stack
(tests/end_to_end/test_schema_registry.py)."""

from __future__ import annotations

import dataclasses
import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from stacktools.compose import engine as container_engine
from stacktools.stack import certs
from stacktools.stack.settings import Settings
from streamkit.kafka_io import read_to_end
from streamkit.paths import REPO_ROOT
from streamkit.wire import AvroCodec
from streamkit.wire.registry import COMPATIBILITY, RegistryClient, subject, unframe
from tests.docker.test_compose_stack import replay
from tests.support.compose import (
    KEEP_FOREVER,
    ComposeProject,
    build_images,
    free_published_ports,
)
from tests.support.harness import expected_records, wait_for_keys
from tests.support.messages import key_of

pytestmark = pytest.mark.containers

SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"
#: The rows replayed: enough for every machine of the sample, few enough for a short round.
ROWS = 300
SERVERS = ("kafka", "mosquitto", "influxdb", "schema-registry", "mqtt-bridge")
ONE_SHOT = ("certs", "provision", "schema-registry-storage")
RAW = "machinedata.raw"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeProject]:
    build_images()
    container_engine.start()
    work = tmp_path_factory.mktemp("compose-registry")
    compose = ComposeProject(
        f"mdreg{os.getpid()}",
        work,
        free_published_ports(),
        # the two lines docs/containers.md tells users to put into .env
        {
            "SCHEMA_REGISTRY": "true",
            "COMPOSE_PROFILES": "registry",
            "REPLAY_LIVE": "false",
            **KEEP_FOREVER,
        },
    )
    events = REPO_ROOT / "data" / f"compose-registry-test-{os.getpid()}.json"
    events.write_text("".join(SAMPLE.read_text().splitlines(keepends=True)[:ROWS]))
    compose.events = [events]
    try:
        compose.run("build", timeout_s=2400)
        compose.run("up", "-d", *SERVERS, timeout_s=900)
        compose.wait_ready(SERVERS, ONE_SHOT, timeout_s=600)
        yield compose
    finally:
        compose.down("registry")
        events.unlink(missing_ok=True)


def registry_settings(project: ComposeProject, run_dir: Path) -> Settings:
    url = f"https://127.0.0.1:{project.ports['SCHEMA_REGISTRY_PORT']}/apis/ccompat/v7"
    return dataclasses.replace(
        project.host_settings(run_dir), schema_registry=True, schema_registry_url=url
    )


def test_the_registry_serves_https_only_with_the_certs_job_s_certificate(
    project: ComposeProject, tmp_path: Path
) -> None:
    """Its API answers over HTTPS verified with the project's CA (for 127.0.0.1, as published);
    another CA and plain HTTP get nothing; the key it reads is its own copy, its user's alone;
    its database is a file on the registry's volume."""
    settings = registry_settings(project, tmp_path)
    status, subjects = RegistryClient(settings).call("GET", "/subjects")
    assert status == 200 and isinstance(subjects, list), subjects
    base = f"127.0.0.1:{project.ports['SCHEMA_REGISTRY_PORT']}"
    stranger = certs.ensure(Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)})).ca
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(
            f"https://{base}/health/ready",
            timeout=10,
            context=ssl.create_default_context(cafile=str(stranger)),
        )
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(f"http://{base}/health/ready", timeout=10)
    owner = project.run(
        "exec", "-T", "schema-registry", "stat", "-c", "%u %a", f"/tls/{certs.REGISTRY_KEY}"
    ).stdout.split()
    user = project.run("exec", "-T", "schema-registry", "id", "-u").stdout.strip()
    assert owner == [user, "400"] and user != "0", (owner, user)
    # its H2 database is on the named volume (not in memory): schema ids survive a restart
    database = project.run(
        "exec", "-T", "schema-registry", "stat", "-c", "%u %s", "/var/lib/apicurio/registry.mv.db"
    ).stdout.split()
    assert database[0] == user and int(database[1]) > 0, database


def test_a_registry_aware_client_decodes_the_bridge_s_records(
    project: ComposeProject, tmp_path: Path
) -> None:
    """The rows replayed through the compose bridge (SCHEMA_REGISTRY from .env): every raw record
    carries the id registered under ``machinedata.raw-value`` with the BACKWARD rule, and
    confluent-kafka's AvroDeserializer, given only the registry's URL and the CA, decodes each
    to what the pipeline's own reader sees, with the values the rows imply."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    events = project.events[0]
    replay(project, events, rate=0)
    settings = registry_settings(project, tmp_path)
    expected = expected_records(events)
    assert set(expected) <= wait_for_keys(settings, RAW, set(expected), 120)

    ours = RegistryClient(settings)
    status, latest = ours.call("GET", f"/subjects/{subject(RAW)}/versions/latest")
    assert status == 200, latest
    status, rule = ours.call("GET", f"/config/{subject(RAW)}")
    assert status == 200 and rule.get("compatibilityLevel") == COMPATIBILITY, rule
    standard_client = SchemaRegistryClient(
        {"url": settings.registry_url, "ssl.ca.location": str(settings.ca_path)}
    )
    deserialize = AvroDeserializer(standard_client)
    codec = AvroCodec("measurement")
    decoded = {}
    for message in read_to_end(settings, RAW):
        value = message.value()
        assert value is not None
        schema_id, body = unframe(value)
        assert schema_id == latest["id"], (schema_id, latest)
        record = deserialize(value, SerializationContext(RAW, MessageField.VALUE))
        assert record == codec.decode(body)
        decoded[key_of(message)] = record["value"]
    assert decoded == expected
    print(json.dumps({"records": len(decoded), "schema id": latest["id"]}))
