"""The connector's commits: a batch's Kafka offsets, alone or in one transaction with its dead
letters, and what to do when a commit cannot be made (drop the batch and rewind, retry, or
exit). Apart from the loop (connector.py) because the exactly-once argument lives here: an
offset is committed only with everything it passes, and a batch not committed is read again."""

from __future__ import annotations

import logging
from collections.abc import Callable

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from db_connector.batch import Batch, DeadLetter
from db_connector.config import ConnectorSettings
from db_connector.dead_letters import produce_dead_letter
from db_connector.errors import FencedOut, RewindFailed, TransactionStuck
from streamkit.deadline import Backoff, Deadline
from streamkit.shutdown import ShutdownFlag

log = logging.getLogger("db_connector")

#: How long one transactional call may block, and the time a step may take in all its retries.
STEP_TIMEOUT_S = 30.0

#: Errors of an offset commit that mean "not yours any more": the records are re-read by
#: whoever owns the partitions now, so the batch is dropped, not retried.
STALE_GROUP_CODES = {
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.FENCED_INSTANCE_ID,
}


class Committer:
    """Commits batches for the connector's loop, which owns the group membership: ``wait``
    backs off while serving the group (True: shutdown), ``generation`` is the loop's current
    one (a batch of an older one was revoked and must not commit), ``forget_polled`` drops
    records polled ahead, which a rewind reads again."""

    def __init__(
        self,
        settings: ConnectorSettings,
        consumer: Consumer,
        producer: Producer,
        shutdown: ShutdownFlag,
        wait: Callable[[float], bool],
        generation: Callable[[], int],
        forget_polled: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.consumer = consumer
        self.producer = producer
        self.shutdown = shutdown
        self.wait = wait
        self.generation = generation
        self.forget_polled = forget_polled

    def commit(self, batch: Batch, dead: list[DeadLetter]) -> bool:
        """Commit the batch's offsets, with its dead letters in one transaction when it has any.
        False when it was not committed: the caller then rewinds (:meth:`rewind`), so that it is
        read and written again."""
        return self._commit_transaction(batch, dead) if dead else self._commit_offsets(batch)

    def _commit_offsets(self, batch: Batch) -> bool:
        backoff = self.settings.write_backoff()
        while batch.generation == self.generation():
            try:
                self.consumer.commit(offsets=batch.offsets(), asynchronous=False)
                return True
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.code() in STALE_GROUP_CODES:
                    log.info(
                        "commit refused after a rebalance; the batch will be re-read",
                        extra={"error": str(error)},
                    )
                    return False
                if not error.retriable():
                    log.error(
                        "offset commit failed; re-reading the batch", extra={"error": str(error)}
                    )
                    return False
                delay = backoff.next_delay()
                log.warning(
                    "offset commit failed, retrying",
                    extra={"error": str(error), "retry_in_s": round(delay, 2)},
                )
            if self.wait(delay):
                return False
        return False

    def _commit_transaction(self, batch: Batch, dead: list[DeadLetter]) -> bool:
        """Dead letters + offsets atomically. A retriable failure of one step retries that
        step inside the same transaction (its outcome may be unknown, so it must not be
        redone in a new one); an abortable one aborts and starts the transaction over."""
        backoff = self.settings.write_backoff()
        while batch.generation == self.generation():
            try:
                self.producer.begin_transaction()
                for letter in dead:
                    produce_dead_letter(self.producer, self.settings.dlq_topic, letter)
                self._retrying(
                    lambda: self.producer.send_offsets_to_transaction(
                        batch.offsets(), self.consumer.consumer_group_metadata(), STEP_TIMEOUT_S
                    )
                )
                self._retrying(lambda: self.producer.commit_transaction(STEP_TIMEOUT_S))
                return True
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.fatal():
                    raise FencedOut(str(error)) from None
                self._abort()
                if self.shutdown.requested or error.code() in STALE_GROUP_CODES:
                    return False
                if not error.txn_requires_abort():
                    log.error(
                        "transaction failed; re-reading the batch", extra={"error": str(error)}
                    )
                    return False
                delay = backoff.next_delay()
                log.warning(
                    "transaction aborted, retrying",
                    extra={"error": str(error), "retry_in_s": round(delay, 2)},
                )
            if self.wait(delay):
                return False
        return False

    def _retrying(
        self, step: Callable[[], None], attempts: int = 4, budget_s: float = STEP_TIMEOUT_S
    ) -> None:
        """Retry a transactional step that failed transiently (its outcome may be unknown, so
        it is retried, not redone). A step that keeps failing, or fails only after waiting out
        its whole time (a request librdkafka never sends again once the coordinator was
        unreachable: retrying it only waits again), wedges the producer: after ``attempts`` or
        ``budget_s`` the process exits (TransactionStuck), and the restarted instance fences
        this producer, which aborts the open transaction; nothing was committed."""
        backoff = self.settings.write_backoff()
        budget = Deadline(budget_s)
        for attempt in range(1, attempts + 1):
            try:
                step()
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or self.shutdown.requested:
                    raise
                if attempt == attempts or budget.expired():
                    raise TransactionStuck(str(exc.args[0])) from exc
                log.warning(
                    "transaction step failed, retrying",
                    extra={"error": str(exc.args[0]), "attempt": attempt},
                )
                self.wait(backoff.next_delay())

    def _abort(self, attempts: int = 5) -> None:
        """Abort the open transaction; a retriable failure is retried (a transaction left open
        would refuse the next begin_transaction)."""
        backoff = Backoff(initial_s=0.1, max_s=0.4)  # 0.1, 0.2, 0.4, 0.4, 0.4 s: 1.5 s in all
        for attempt in range(1, attempts + 1):
            try:
                self.producer.abort_transaction(30)
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.fatal():
                    raise FencedOut(str(error)) from None
                log.warning("abort failed", extra={"error": str(error), "attempt": attempt})
                if not error.retriable() or self.shutdown.requested:
                    return
                backoff.sleep()

    def rewind(self) -> None:
        """Make everything uncommitted be read again (its points are rewritten harmlessly): every
        assigned partition goes back to its committed offset, not only the dropped batch's
        partitions, since records of others may already sit in the batch collected meanwhile,
        which the caller drops. A partition never committed goes back to its beginning."""
        self.forget_polled()
        try:
            positions = self.consumer.committed(self.consumer.assignment(), timeout=30)
        except KafkaException as exc:
            raise RewindFailed(f"committed offsets not readable: {exc.args[0]}") from None
        for position in positions:
            offset = position.offset if position.offset >= 0 else OFFSET_BEGINNING
            try:
                self.consumer.seek(TopicPartition(position.topic, position.partition, offset))
            except KafkaException as exc:
                log.warning(
                    "seek failed (partition moved?)",
                    extra={
                        "topic": position.topic,
                        "partition": position.partition,
                        "error": str(exc.args[0]),
                    },
                )
