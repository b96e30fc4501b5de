"""The tools' retry over transient broker answers: bounded by time, not by a count of tries."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from streamkit.deadline import Backoff
from streamkit.kafka_io import retry_transient


def failing(code: int, times: int) -> tuple[list[float], object]:
    """A call that answers ``code`` ``times`` times, then 'ok'; the list records each call."""
    calls: list[float] = []

    def call() -> str:
        calls.append(time.monotonic())
        if len(calls) <= times:
            raise KafkaException(KafkaError(code))
        return "ok"

    return calls, call


def test_a_new_leader_not_caught_up_is_waited_out_past_five_tries() -> None:
    calls, call = failing(KafkaError.OFFSET_NOT_AVAILABLE, 6)
    assert retry_transient(call, 60, Backoff(0.01, 0.1)) == "ok"  # type: ignore[arg-type]
    assert len(calls) == 7


def test_a_transient_answer_past_the_budget_is_raised() -> None:
    calls, call = failing(KafkaError.OFFSET_NOT_AVAILABLE, 1000)
    started = time.monotonic()
    with pytest.raises(KafkaException):
        retry_transient(call, 2.5, Backoff(0.1, 0.5))  # type: ignore[arg-type]
    assert 2.5 <= time.monotonic() - started < 4
    assert len(calls) >= 5


def test_a_lasting_error_is_raised_at_once() -> None:
    calls, call = failing(KafkaError.TOPIC_AUTHORIZATION_FAILED, 1)
    with pytest.raises(KafkaException):
        retry_transient(call, within_s=60)  # type: ignore[arg-type]
    assert len(calls) == 1
