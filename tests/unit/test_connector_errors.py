"""The connector's reading of in-band consumer errors: a fatal one ends the process (a live
connector that reads nothing is worse than a restart); the others are only logged."""
import pytest
from confluent_kafka import KafkaError

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
