"""Least privilege on the real servers: every right a service lacks is refused by the server.

The expected verdicts come from the issue's wording (written out here) and, for the full
matrix, from the access table; the verdicts themselves are the servers' answers.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from stacktools.harness.wiring import private_database, private_topic
from stacktools.stack import Stack
from stacktools.stack.access import SPARK_JOB_USERS, TOPIC_RIGHTS
from stacktools.stack.influx import InfluxClient
from stacktools.stack.kafka_access import SERVICE_USERS
from stacktools.stack.settings import Settings
from streamkit.deadline import Deadline, TimedOut
from streamkit.kafka_clients import admin_client, client_config, idempotent_producer, owned_name
from streamkit.mqtt_client import MqttConnectError, connect, make_client
from streamkit.secret import Secret
from tests.support.waits import ONE_MESSAGE_S

pytestmark = pytest.mark.stack
#: A hang detector for one read of a record already there (or its refusal): a coordinator
#: lookup on a loaded broker can take seconds, only a hang takes a minute.
READ_LIMIT_S = 60.0
#: How long a group's coordinator lookup has, after the record came, to be refused: the lookup
#: is one round trip to the local broker, answered before or with the first fetch.
GROUP_SETTLE_S = 3.0

#: The group each user may use (its own prefix); the bridge has none, so any name will do.
GROUPS = {
    "bridge": "bridge-access-check",
    **{user: f"{user}.access-check" for user in SPARK_JOB_USERS},
    "connector": "db-connector-access-check",
    "alerts": "alerts.access-check",
}
#: The output topics (by role) each Spark job writes and no other job may, but the single pass,
#: which writes what the other two write together.
JOB_OUTPUTS = {
    "spark-single-pass": ("joined", "aggregates", "opstats", "overloads"),
    "spark-join": ("joined", "opstats", "overloads"),  # the statistics run beside the join
    "spark-aggregate": ("aggregates",),
}


# ----------------------------------------------------------------------------- Kafka
def can_write(settings: Settings, topic: str) -> bool:
    producer = Producer({**client_config(settings, "access-check"), "message.timeout.ms": 15000})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"access-check", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    assert len(errors) == 1, "no delivery report"
    assert errors[0] is None or errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors[0]
    return errors[0] is None


def can_read(settings: Settings, topic: str) -> bool:
    """A record is known to be there (written by the admin), so a permitted read returns it."""
    consumer = Consumer(
        {
            **client_config(settings, "access-check"),
            "group.id": GROUPS[settings.kafka_username],
            "enable.auto.commit": False,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        # not even Describe: a fetch would wait for the topic forever
        if metadata.error is not None:
            assert metadata.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, metadata.error
            return False
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = Deadline(READ_LIMIT_S)
        while not deadline.expired():
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is None:
                return True
            if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                return False
            # librdkafka looks up the group's coordinator even for an assign-only read; the
            # bridge has no group at all, every other user reads in a group of its own
            assert settings.kafka_username == "bridge", error
            assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
        raise TimedOut(f"neither a record nor a refusal from {topic} within {READ_LIMIT_S:g} s")
    finally:
        consumer.close()


def can_use_transactional_id(settings: Settings, transactional_id: str) -> bool:
    """Whether the broker lets this user open transactions under that id (the refusal is the
    specific authorization error, nothing else)."""
    producer = Producer(
        {**client_config(settings, "access-check"), "transactional.id": transactional_id}
    )
    try:
        producer.init_transactions(20)
    except KafkaException as refused:
        assert refused.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, refused
        return False
    return True


def group_refused(settings: Settings, group: str, topic: str) -> bool:
    """Whether the broker refuses this user a read of ``topic`` (partition 0, which has a record)
    in consumer group ``group``, with the group authorization error. The refusal is the answer
    to the group's coordinator lookup, which may come just after the record: a read is taken as
    permitted once the record came and the lookup had GROUP_SETTLE_S more to fail."""
    consumer = Consumer(
        {**client_config(settings, "access-check"), "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline, settled = Deadline(READ_LIMIT_S), None
        while not (deadline.expired() or (settled is not None and settled.expired())):
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
                return True
            if settled is None:
                settled = Deadline(GROUP_SETTLE_S)
        if settled is None:
            raise TimedOut(f"neither a record nor a refusal from {topic} within {READ_LIMIT_S:g} s")
        return False
    finally:
        consumer.close()


def commits_a_transaction(settings: Settings, transactional_id: str, topics: list[str]) -> None:
    """Open the transactional id, write one record to each topic in one transaction, commit."""
    producer = Producer(
        {**client_config(settings, "access-check"), "transactional.id": transactional_id}
    )
    producer.init_transactions(20)
    producer.begin_transaction()
    for topic in topics:
        producer.produce(topic, b"access-check")
    producer.commit_transaction(20)


@pytest.fixture(scope="module")
def role_topics(stack_settings: Settings) -> dict[str, str]:
    """A private topic per role, each with one record in partition 0."""
    topics = {role: private_topic(stack_settings, role, 1) for role in TOPIC_RIGHTS}
    producer = idempotent_producer(stack_settings, "access-check-feed")
    for topic in topics.values():
        producer.produce(topic, b"seed", partition=0)
    assert producer.flush(30) == 0
    return topics


def test_anonymous_and_wrong_password_are_refused(stack_settings: Settings) -> None:
    """A client without SASL gets no answer but a closed connection (the listener speaks only
    SASL, there is nothing to refuse it with); a wrong password is refused by SCRAM."""
    errors: list[KafkaError] = []
    anonymous: dict[str, Any] = {
        "bootstrap.servers": stack_settings.bootstrap_servers,
        "socket.timeout.ms": 3000,
        "error_cb": errors.append,
    }
    with pytest.raises(KafkaException) as refused:
        AdminClient(anonymous).list_topics(timeout=5)
    assert refused.value.args[0].code() == KafkaError._TRANSPORT, refused.value
    assert not any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors
    errors.clear()
    wrong = {
        **client_config(stack_settings.acting_as("kafka", "bridge"), "wrong"),
        "sasl.password": "wrong-password",
        "error_cb": errors.append,
    }
    client = AdminClient(wrong)
    with pytest.raises(KafkaException):
        client.list_topics(timeout=5)
    client.poll(2)  # serves the error callbacks
    assert any(
        error.code() == KafkaError._AUTHENTICATION and "SASL authentication error" in error.str()
        for error in errors
    ), errors
    assert AdminClient(client_config(stack_settings, "right")).list_topics(timeout=10).brokers


def test_the_issue_s_refusals(stack_settings: Settings, role_topics: dict[str, str]) -> None:
    connector = stack_settings.acting_as("kafka", "connector")
    bridge = stack_settings.acting_as("kafka", "bridge")
    assert not can_write(connector, role_topics["raw"]), "the connector wrote the raw topic"
    assert not can_read(bridge, role_topics["joined"]), "the bridge read the joined topic"
    assert not can_read(bridge, role_topics["raw"]), "the bridge read the raw topic"
    assert can_write(bridge, role_topics["raw"]) and can_read(connector, role_topics["joined"])


def test_every_user_has_exactly_its_topic_rights(
    stack_settings: Settings, role_topics: dict[str, str]
) -> None:
    verdicts, expected = {}, {}
    for user in SERVICE_USERS:
        settings = stack_settings.acting_as("kafka", user)
        for role, topic in role_topics.items():
            verdicts[(user, role)] = (can_read(settings, topic), can_write(settings, topic))
            rights = TOPIC_RIGHTS[role].get(user, ())
            expected[(user, role)] = ("read" in rights, "write" in rights)
    assert verdicts == expected


def test_transactional_ids_and_groups_are_per_service(
    stack_settings: Settings, role_topics: dict[str, str]
) -> None:
    connector = stack_settings.acting_as("kafka", "connector")
    assert not can_use_transactional_id(connector, "spark-join.eos-lsb-join")
    spark = stack_settings.acting_as("kafka", "spark-join")
    assert group_refused(spark, "db-connector", role_topics["raw"]), (
        "Spark used the connector's group"
    )


# ----------------------------------------------------------------------------- MQTT
def _mqtt(settings: Settings, user: str) -> mqtt.Client:
    acting = settings.acting_as("mqtt", user)
    client = make_client(acting, client_id=f"access-{user}-{uuid.uuid4().hex[:6]}")
    connect(client, acting, timeout_s=10)
    return client


def test_mqtt_machines_only_publish_under_the_prefix_and_the_bridge_only_subscribes(
    stack_settings: Settings,
) -> None:
    prefix = f"{stack_settings.mqtt_topic_prefix}/access-{uuid.uuid4().hex[:6]}"
    received: list[tuple[str, bytes]] = []
    arrived = threading.Event()
    watcher = _mqtt(stack_settings, "admin")

    def on_message(_c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        received.append((message.topic, bytes(message.payload)))
        arrived.set()

    watcher.on_message = on_message
    subacks = threading.Semaphore(0)
    watcher.on_subscribe = lambda *_args: subacks.release()
    watcher.subscribe("#", qos=1)
    # mosquitto grants any SUBACK and applies "read" when it delivers: a machine that
    # subscribes to the prefix must get nothing
    eavesdropped: list[bytes] = []
    eavesdropper = _mqtt(stack_settings, "machine")
    eavesdropper.on_message = lambda _c, _u, message: eavesdropped.append(bytes(message.payload))
    eavesdropper.on_subscribe = lambda *_args: subacks.release()
    eavesdropper.subscribe(f"{prefix}/#", qos=1)
    clients = [watcher, eavesdropper]

    def publish(user: str, topic: str, payload: bytes) -> None:
        """From a client of its own: mosquitto may drop the connection of a refused publish."""
        clients.append(_mqtt(stack_settings, user))
        clients[-1].publish(topic, payload, qos=1).wait_for_publish(ONE_MESSAGE_S)

    try:
        # subscriptions in place
        assert subacks.acquire(timeout=ONE_MESSAGE_S) and subacks.acquire(timeout=ONE_MESSAGE_S), (
            "no SUBACK"
        )
        publish("machine", "elsewhere/R0815", b"outside the prefix")
        publish("bridge", f"{prefix}/R0815", b"from the bridge")
        publish("machine", f"{prefix}/R0815", b"from a machine")
        assert arrived.wait(ONE_MESSAGE_S)
        # The allowed message was published last, each after the previous one's PUBACK: in the
        # watcher's one session anything let through before it has arrived by now.
        assert received == [(f"{prefix}/R0815", b"from a machine")]
        # The eavesdropper has no message of its own to wait for (a refusal is silence): the
        # machine's row reached the watcher, so a copy for it was routed too; give its delivery
        # a second, generous on loopback, rather than a condition nothing can signal.
        time.sleep(1)
        assert eavesdropped == [], "a machine read another machine's rows"
    finally:
        for client in clients:
            client.disconnect()
            client.loop_stop()


def test_mqtt_wrong_password_is_refused(stack_settings: Settings) -> None:
    wrong = dataclasses.replace(
        stack_settings.acting_as("mqtt", "machine"), mqtt_password=Secret("wrong-password")
    )
    with pytest.raises(MqttConnectError, match="refused") as refused:
        connect(make_client(wrong), wrong, timeout_s=5)
    # Mosquitto's CONNACK for a bad password
    assert refused.value.reason == "Not authorized", refused.value


# ----------------------------------------------------------------------------- InfluxDB
def _write(settings: Settings, database: str) -> int:
    return InfluxClient(settings).write(
        database, ["access_check,thing=R0815 power=1 1700000000000"], "ms"
    )


def test_influx_connector_only_writes_grafana_only_reads(stack_settings: Settings) -> None:
    database = private_database(stack_settings)
    connector = stack_settings.acting_as("influx", "connector")
    grafana = stack_settings.acting_as("influx", "grafana")
    assert _write(connector, database) == 204
    assert _write(grafana, database) == 403, "Grafana's user wrote"
    wrong = dataclasses.replace(connector, influx_password=Secret("wrong-password"))
    assert _write(wrong, database) == 401
    status, body = InfluxClient(grafana).query('SELECT * FROM "access_check"', database=database)
    assert status == 200 and body["results"][0]["series"][0]["values"], body
    status, _ = InfluxClient(connector).query('SELECT * FROM "access_check"', database=database)
    assert status == 403, "the connector read"
    for user in (connector, grafana):
        status, _ = InfluxClient(user).query(f'DROP DATABASE "{database}"')
        assert status == 403, f"{user.influx_username} dropped a database"


@pytest.mark.parametrize("job", SPARK_JOB_USERS)
def test_each_spark_job_does_its_own_work_and_not_another_s(
    stack_settings: Settings, role_topics: dict[str, str], job: str
) -> None:
    """As its own user a job reads the raw topic and commits a transaction of its outputs and a
    marker under its own transactional id; the broker refuses it another job's output topic
    (the single pass has none: it writes the other two's, the operation statistics as the join
    job does), another job's transactional id and another job's consumer group."""
    settings = stack_settings.acting_as("kafka", job)
    own = [role_topics[role] for role in (*JOB_OUTPUTS[job], "markers", "late", "dlq")]
    commits_a_transaction(settings, owned_name(settings, f"eos-access-check-{job}"), own)
    assert can_read(settings, role_topics["raw"])
    foreign = {role for other in JOB_OUTPUTS for role in JOB_OUTPUTS[other]} - set(JOB_OUTPUTS[job])
    for role in sorted(foreign):
        assert not can_write(settings, role_topics[role]), f"{job} wrote the {role} topic"
    for other in SPARK_JOB_USERS:
        if other != job:
            theirs = owned_name(stack_settings.acting_as("kafka", other), "eos-single-pass")
            assert not can_use_transactional_id(settings, theirs), f"{job} took {theirs}"
            assert group_refused(settings, f"{other}.spark-kafka-source", role_topics["raw"]), (
                f"{job} read in {other}'s group"
            )
    assert not group_refused(settings, f"{job}.spark-kafka-source", role_topics["raw"])


def logs_in(settings: Settings) -> bool:
    """Whether the broker takes this user's password (a refusal is SCRAM's, nothing else)."""
    errors: list[KafkaError] = []
    config: dict[str, Any] = {**client_config(settings, "login-check"), "error_cb": errors.append}
    client = AdminClient(config)
    try:
        client.list_topics(timeout=10)
        return True
    except KafkaException:
        client.poll(2)  # serves the error callbacks
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        return False


def test_the_launcher_deletes_a_retired_user_and_its_rights(stack_settings: Settings) -> None:
    """A run directory from before keeps the Spark jobs' shared user in its cluster metadata:
    the next ``up`` deletes it and its ACLs, so its old password logs in no more."""
    admin = admin_client(stack_settings)
    password = f"retired-{uuid.uuid4().hex}"
    upsert = UserScramCredentialUpsertion(
        "spark", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)
    grant = AclBinding(
        ResourceType.TRANSACTIONAL_ID,
        "eos-",
        ResourcePatternType.PREFIXED,
        "User:spark",
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([grant]).values():
        future.result(timeout=30)
    retired = dataclasses.replace(
        stack_settings, kafka_username="spark", kafka_password=Secret(password)
    )
    assert logs_in(retired)
    Stack(stack_settings, ["kafka"]).up()
    assert not logs_in(retired), "the retired user still logs in"
    rights = admin.describe_acls(
        AclBindingFilter(
            ResourceType.ANY,
            None,  # type: ignore[arg-type]
            ResourcePatternType.ANY,
            "User:spark",
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
    ).result(timeout=30)
    assert rights == []
