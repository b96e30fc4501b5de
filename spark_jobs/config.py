"""Settings shared by every Spark streaming job (the join job subclasses this with its pairs).

Defaults suit the laptop stack (local[*]); on a standalone cluster only SPARK_MASTER
and SPARK_CHECKPOINT_DIR change (the checkpoint must then be on storage every node sees).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from streamkit.config import Settings, login_as, setting
from streamkit.durations import parse_duration_ms


@dataclass(frozen=True)
class SparkJobSettings(Settings):
    kafka_username: str = login_as("kafka", "spark")
    spark_master: str = setting("local[*]", "SPARK_MASTER", "Spark master URL (local[*], local[N] or spark://host:7077)")
    shuffle_partitions: int = setting(2, "SPARK_SHUFFLE_PARTITIONS",
                                      "state store partitions; fixed in the checkpoint at the first start "
                                      "(200, Spark's default, made stateful batches ~23x slower here)")
    checkpoint_dir: str = setting("", "SPARK_CHECKPOINT_DIR",
                                          "checkpoint directory of the query (default <run dir>/checkpoints/<query name>)")
    max_offsets_per_trigger: int = setting(200000, "SPARK_MAX_OFFSETS_PER_TRIGGER",
                                           "upper bound of input records per micro-batch (large: a job that fell "
                                           "behind catches up in few batches; live batches stay small)")
    trigger_seconds: float = setting(1.0, "SPARK_TRIGGER_SECONDS", "micro-batch trigger interval")
    starting_offsets: str = setting("earliest", "SPARK_STARTING_OFFSETS",
                                    "where a query without checkpoint starts (earliest/latest); a checkpoint always wins")
    fail_on_data_loss: bool = setting(True, "SPARK_FAIL_ON_DATA_LOSS",
                                      "fail when input offsets vanished (topic recreated, retention) instead of "
                                      "silently skipping them; compaction gaps and transaction markers are fine")
    marker_topic: str = setting("machinedata.commit-markers", "MARKER_TOPIC",
                                "compacted topic of exactly-once commit markers (one key per query)")
    query_name: str = setting("", "SPARK_QUERY_NAME",
                              "query name: names the checkpoint, the transactional.id and the marker key "
                              "(default: the job's own name)")
    max_future: str = setting("1h", "SPARK_MAX_FUTURE",
                              "set aside (late topic, future_timestamp) a record this far ahead of the batch's "
                              "processing time, so a bad clock moves no event-time clock; as BRIDGE_MAX_FUTURE")
    transaction_timeout_ms: int = setting(60000, "SPARK_TRANSACTION_TIMEOUT_MS",
                                          "Kafka transaction timeout; must stay below the broker's "
                                          "transaction.max.timeout.ms (15 min by default)")

    def max_future_ms(self) -> int:
        return parse_duration_ms(self.max_future)

    def query(self, default_name: str) -> str:
        """The query name in effect: the configured one or the job's default."""
        return self.query_name or default_name

    def checkpoint_for(self, query: str) -> Path:
        """Per query, so two jobs (or two test runs) never share a checkpoint."""
        return Path(self.checkpoint_dir).expanduser() if self.checkpoint_dir else self.run_dir / "checkpoints" / query
