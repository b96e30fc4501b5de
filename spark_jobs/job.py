"""The one template of a streaming job: what it is called, its settings, the checks to run
before Spark starts, and how to build its query. The runner does the rest the same way for
every job (start-up, Spark session, exactly-once sink, restarts), so a job is only its query."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, TypeVar

from spark_jobs.config import SparkJobSettings
from spark_jobs.eos_sink import FaultHook
from spark_jobs.runner import run_query
from spark_jobs.session import ROCKSDB_STATE_STORE
from spark_jobs.sinks import BatchStage
from streamkit.service import run_service
from streamkit.shutdown import ShutdownFlag

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

S = TypeVar("S", bound=SparkJobSettings)

#: A job's query: given its settings, what turns a Spark session into Kafka records.
QueryBuilder = Callable[[S], Callable[["SparkSession"], "DataFrame"]]


def _no_check(settings: SparkJobSettings) -> None:
    """A job whose settings need no check beyond their types."""


def _sink_alone(settings: SparkJobSettings) -> BatchStage | None:
    """A job whose query's rows are the sink's: nothing runs around it."""
    return None


@dataclass(frozen=True)
class StreamingJob(Generic[S]):
    service: str  #: metrics and log name
    module: str  #: ``python -m <module>``
    doc: str | None  #: its --help
    settings_type: type[S]
    default_query: Callable[[S], str]  #: the query name unless SPARK_QUERY_NAME gives one
    build: QueryBuilder
    check: Callable[[S], None] = (
        _no_check  #: fails fast (ValueError: a usage error) before Spark starts
    )
    session_conf: dict[str, str] = field(default_factory=lambda: dict(ROCKSDB_STATE_STORE))
    #: what runs each batch around the sink, if the query's rows are not the sink's yet
    batches: Callable[[S], BatchStage | None] = _sink_alone

    def main(
        self,
        argv: list[str] | None = None,
        *,
        fault_hook: FaultHook | None = None,
        module: str | None = None,
    ) -> int:
        """``python -m <module>``; the tests' drivers pass a ``fault_hook`` and their own module."""
        return run_service(
            self.service,
            self.settings_type,
            self.doc,
            argv,
            lambda settings, shutdown: self.run(settings, shutdown, fault_hook),
            check=self.check_all,
            module=module or self.module,
        )

    def check_all(self, settings: S) -> None:
        """The settings every job shares, then the job's own."""
        settings.extra_spark_conf()
        self.check(settings)

    def run(self, settings: S, shutdown: ShutdownFlag, fault_hook: FaultHook | None = None) -> int:
        batches = self.batches(settings)
        return run_query(
            settings,
            shutdown,
            self.default_query(settings),
            self.build(settings),
            available_now=settings.available_now,
            session_conf=self.session_conf,
            fault_hook=fault_hook,
            # a driver-side stage runs no Python worker to warm
            warm_module=self.module if batches is None else None,
            batches=batches,
        )
