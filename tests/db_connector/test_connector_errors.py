"""The connector's reading of in-band consumer errors: a fatal one ends the process (a live
connector that reads nothing is worse than a restart); the others are only logged."""
import pytest
from confluent_kafka import KafkaError, KafkaException

from db_connector.connector import Connector, ConsumerFailed


@pytest.mark.parametrize("fenced", [
    KafkaError(KafkaError._FATAL, "static consumer fenced"),  # as the consumer reports it in-band
    KafkaError(KafkaError._FENCED, "static consumer fenced", fatal=True)])
def test_a_fatal_consumer_error_ends_the_connector(fenced: KafkaError) -> None:
    with pytest.raises(ConsumerFailed, match="fenced"):
        Connector._check_errors([KafkaError(KafkaError._PARTITION_EOF), fenced])


def test_transient_consumer_errors_are_only_logged(caplog: pytest.LogCaptureFixture) -> None:
    Connector._check_errors([KafkaError(KafkaError._PARTITION_EOF),
                             KafkaError(KafkaError._TRANSPORT, "broker down", retriable=True)])
    assert [r.getMessage() for r in caplog.records] == ["consumer error"]


def test_a_transaction_step_that_keeps_timing_out_ends_the_connector() -> None:
    """A wedged producer (every retry of send_offsets_to_transaction times out) must not keep
    the connector alive and idle: after a few attempts it exits, and the restart fences it."""
    from db_connector.committer import Committer
    from db_connector.config import ConnectorSettings
    from db_connector.connector import TransactionStuck
    from streamkit.shutdown import ShutdownFlag

    # no servers: only the retry logic
    committer = Committer(ConnectorSettings.from_sources(cli={"retry_initial_ms": 1, "retry_max_ms": 2}),
                          consumer=None, producer=None, shutdown=ShutdownFlag(), wait=lambda _s: False,
                          generation=lambda: 0, forget_polled=lambda: None)
    calls = []

    def timing_out() -> None:
        calls.append(1)
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "add offsets timed out", retriable=True))

    with pytest.raises(TransactionStuck):
        committer._retrying(timing_out)
    assert len(calls) == 4
