"""python -m tests.drivers.eos_driver: a minimal pass-through job through the real runner and sink.

Copies every record of --raw-topic (key, value, partition) to --output-topic exactly once, so
the fault-injection test can compare output and input as multisets. Runs with
``--available-now`` (stop when caught up) or until SIGTERM. Writes its JVM's pid to
--jvm-pid-file so the test can wait for a killed driver's JVM to be gone before restarting.
With ``EOS_FAULT_POINT`` and ``EOS_FAULT_BATCH`` set it SIGKILLs itself there
(tests/support/sink_faults.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from spark_jobs.config import SparkJobSettings
from spark_jobs.job import StreamingJob
from streamkit.fields import login_as, setting
from streamkit.kafka_clients import owned_name, spark_kafka_options
from tests.support.sink_faults import kill_hook_from_env


@dataclass(frozen=True)
class DriverSettings(SparkJobSettings):
    #: the single pass's user: it may read raw and write joined, the test's output topic role
    kafka_username: str = login_as("kafka", "spark-single-pass")
    output_topic: str = setting("", "EOS_TEST_OUTPUT_TOPIC", "where the copies go")
    jvm_pid_file: str = setting("", "EOS_TEST_JVM_PID_FILE", "file to write the JVM pid to")


def build(settings: DriverSettings):
    """Copy the raw topic as it is (key, value, partition) to the output topic."""

    def query(spark):
        from pyspark.sql import functions as F

        if settings.jvm_pid_file:
            Path(settings.jvm_pid_file).write_text(
                str(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
            )
        frame = (
            spark.readStream.format("kafka")
            .options(**spark_kafka_options(settings))
            .option("subscribe", settings.raw_topic)
            .option("groupIdPrefix", owned_name(settings, "spark-kafka-source"))
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
            .option("kafka.isolation.level", "read_committed")
            .load()
        )
        return frame.select(
            F.lit(settings.output_topic).alias("topic"), "key", "value", "partition"
        )

    return query


JOB = StreamingJob(
    "eos_driver",
    "tests.drivers.eos_driver",
    __doc__,
    DriverSettings,
    lambda _: "eos-driver",
    build,
    session_conf={},
)


def main(argv: list[str] | None = None) -> int:
    """With the fault hook EOS_FAULT_POINT / EOS_FAULT_BATCH ask for."""
    return JOB.main(argv, fault_hook=kill_hook_from_env())


if __name__ == "__main__":
    sys.exit(main())
