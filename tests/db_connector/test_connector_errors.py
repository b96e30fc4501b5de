"""The connector's reading of in-band consumer errors: a fatal one ends the process (a live
connector that reads nothing is worse than a restart); the others are only logged."""

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from db_connector.connector import Connector
from db_connector.errors import ConsumerFailed


@pytest.mark.parametrize(
    "fenced",
    [
        # as the consumer reports it in-band
        KafkaError(KafkaError._FATAL, "static consumer fenced"),
        KafkaError(KafkaError._FENCED, "static consumer fenced", fatal=True),
    ],
)
def test_a_fatal_consumer_error_ends_the_connector(fenced: KafkaError) -> None:
    with pytest.raises(ConsumerFailed, match="fenced"):
        Connector._check_errors([KafkaError(KafkaError._PARTITION_EOF), fenced])


#: The Kafka client a test's code path never reaches.
NO_SERVER: Any = None


def test_transient_consumer_errors_are_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    Connector._check_errors(
        [
            KafkaError(KafkaError._PARTITION_EOF),
            KafkaError(KafkaError._TRANSPORT, "broker down", retriable=True),
        ]
    )
    assert [r.getMessage() for r in caplog.records] == ["consumer error"]


def test_a_transaction_step_that_keeps_timing_out_ends_the_connector() -> None:
    """A wedged producer (every retry of send_offsets_to_transaction times out) must not keep
    the connector alive and idle: after a few attempts it exits, and the restart fences it."""
    from db_connector.committer import Committer
    from db_connector.config import ConnectorSettings
    from db_connector.errors import TransactionStuck
    from streamkit.shutdown import ShutdownFlag

    # no servers: only the retry logic
    committer = Committer(
        ConnectorSettings.from_sources(cli={"retry_initial": "1ms", "retry_max": "2ms"}),
        consumer=NO_SERVER,
        producer=NO_SERVER,
        shutdown=ShutdownFlag(),
        wait=lambda _s: False,
        generation=lambda: 0,
        forget_polled=lambda: None,
    )
    calls = []

    def timing_out() -> None:
        calls.append(1)
        raise KafkaException(
            KafkaError(KafkaError._TIMED_OUT, "add offsets timed out", retriable=True)
        )

    with pytest.raises(TransactionStuck):
        committer._retrying(timing_out)
    assert len(calls) == 4

    # a step that failed only after its whole time is not waited out again: the client faults
    # test saw four such waits of a minute each after the broker was paused
    def timing_out_slowly() -> None:
        time.sleep(0.05)
        timing_out()

    calls.clear()
    with pytest.raises(TransactionStuck):
        committer._retrying(timing_out_slowly, budget_s=0.04)
    assert len(calls) == 1


def test_a_full_producer_queue_delays_a_dead_letter_and_never_escapes() -> None:
    """librdkafka's local queue full (BufferError) while dead-lettering: the connector waits
    for room and writes the letter once; the error escaping crashed it (found by the client
    faults test), and every restart met it again."""
    from db_connector.batch import DeadLetter
    from db_connector.dead_letters import produce_dead_letter

    class Source:  # the record being dead-lettered, as the consumer returned it
        def topic(self) -> str:
            return "machinedata.late"

        def partition(self) -> int:
            return 1

        def offset(self) -> int:
            return 42

        def key(self) -> bytes:
            return b"poison"

        def value(self) -> bytes:
            return b"\x00garbage"

    class FullThenFree:
        def __init__(self) -> None:
            self.full, self.polls = 2, 0
            self.produced: list[tuple[str, bytes, bytes, bytes]] = []

        def produce(self, topic: str, value: bytes, key: bytes, **kwargs: Any) -> None:
            if self.full:
                self.full -= 1
                raise BufferError("Local: Queue full")
            self.produced.append((topic, key, value, dict(kwargs["headers"])["reason"]))

        def poll(self, _timeout: float) -> int:
            self.polls += 1
            return 0

    producer = FullThenFree()
    stand_in: Any = producer  # for a Producer
    source: Any = Source()  # for a consumed Message
    produce_dead_letter(stand_in, "machinedata.dlq", DeadLetter(source, "undecodable", "not Avro"))
    assert producer.produced == [("machinedata.dlq", b"poison", b"\x00garbage", b"undecodable")]
    assert producer.polls == 2


def test_a_consumer_left_without_partitions_ends_the_connector() -> None:
    """After a broker pause librdkafka was seen to revoke the partitions and never rejoin: the
    connector lived on for a quarter of an hour reading nothing. Without partitions for
    REJOIN_LIMIT_S since a revocation (or since it subscribed) it exits, and a restart rejoins;
    an assignment, an empty one too (a spare instance), ends the wait."""
    from db_connector.connector import REJOIN_LIMIT_S

    connector = Connector.__new__(Connector)  # no servers: only the membership's bookkeeping
    connector.generation, connector.carry, connector.paused = 0, [], False
    connector._on_revoke(NO_SERVER, [])
    revoked = connector.unassigned_since
    assert revoked is not None
    connector.check_membership(revoked + REJOIN_LIMIT_S - 1)
    with pytest.raises(ConsumerFailed, match="wedged"):
        connector.check_membership(revoked + REJOIN_LIMIT_S + 1)
    connector._on_assign(NO_SERVER, [])
    connector.check_membership(revoked + 10 * REJOIN_LIMIT_S)
