"""The Spark jobs' settings: what both share, and each job's own.

Defaults suit the laptop stack (local[*]); on a standalone cluster only SPARK_MASTER
and SPARK_CHECKPOINT_DIR change (the checkpoint must then be on storage every node sees).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal

from lsb.results import RESULT_FUNCTIONS, ResultFn
from streamkit.config import KafkaSettings
from streamkit.errors import ConfigError
from streamkit.fields import login_as, serves_metrics_on, setting
from streamkit.paths import CACHE_DIR, SPARK_JARS_DIR, private_directory
from streamkit.sizes import ByteSize
from windowing import WindowRules, parse_windows


def result_function(name: str, variable: str) -> ResultFn:
    """A result function by its name, or a configuration error naming ``variable``."""
    if name not in RESULT_FUNCTIONS:
        known = ", ".join(sorted(RESULT_FUNCTIONS))
        raise ConfigError(variable, f"unknown result function {name!r} (known: {known})")
    return RESULT_FUNCTIONS[name]


@dataclass(frozen=True)
class SparkJobSettings(KafkaSettings):
    """Kafka in, Kafka out (and Spark): no MQTT, InfluxDB or launcher settings. Each job logs
    in to Kafka as a user of its own (stacktools.stack.access)."""

    spark_master: str = setting(
        "local[*]", "SPARK_MASTER", "Spark master URL (local[*], local[N] or spark://host:7077)"
    )
    shuffle_partitions: int = setting(
        1,
        "SPARK_SHUFFLE_PARTITIONS",
        "state store partitions; fixed in the checkpoint at the first start. Keep 1 on a "
        "laptop (one Python worker, the other cores read Kafka); on a cluster set the "
        "executors' total cores, never Spark's default of 200 (docs/performance.md)",
    )
    checkpoint_dir: str = setting(
        "",
        "SPARK_CHECKPOINT_DIR",
        "checkpoint directory of the query (default <run dir>/checkpoints/<query name>)",
    )
    max_offsets_per_trigger: int = setting(
        200000,
        "SPARK_MAX_OFFSETS_PER_TRIGGER",
        "upper bound of input records per micro-batch (large: a job that fell "
        "behind catches up in few batches; live batches stay small)",
    )
    spark_jars_dir: Path = setting(
        SPARK_JARS_DIR,
        "SPARK_EXTRA_JARS_DIR",
        "directory of Spark's Kafka connector and spark-avro jars (scripts/setup.sh fills "
        "the default; the container image sets its own)",
    )
    state_alert_keys: int = setting(
        1_000_000,
        "STATE_ALERT_KEYS",
        "keys the job's state may hold before the StateOverBound alert fires (exported as "
        "spark_state_keys_bound; docs/operations.md)",
    )
    state_alert_bytes: ByteSize = setting(
        ByteSize(2 << 30),
        "STATE_ALERT_BYTES",
        "bytes the job's state may take (its store's memory, the driver's state file) before "
        "the StateOverBound alert fires (exported as spark_state_bytes_bound)",
    )
    trigger: timedelta = setting(
        timedelta(seconds=1),
        "SPARK_TRIGGER",
        "micro-batch trigger interval",
        was="SPARK_TRIGGER_SECONDS",
    )
    class_archive_dir: str = setting(
        str(CACHE_DIR / "jvm-classes"),
        "SPARK_CLASS_ARCHIVE_DIR",
        "where the driver JVM's class archive is kept (the first job writes it when it "
        "stops, later ones load their classes from it and start sooner); empty: none, "
        "e.g. on a read-only file system",
    )
    driver_java_options: str = setting(
        "-XX:TieredStopAtLevel=1",
        "SPARK_DRIVER_JAVA_OPTIONS",
        "the driver JVM's options (local[*]: the executors' too). The default runs only the "
        "quick JIT, which suits short-lived and small jobs; empty: Java's default JIT, for "
        "long runs of large batches",
    )
    warm_python_workers: bool = setting(
        False,
        "SPARK_WARM_PYTHON_WORKERS",
        "start the Python workers and import the job in them while the first batch "
        "is planned, instead of inside it; turn it on with cores to spare (on few cores it "
        "competes with the first batch)",
    )
    spark_conf: str = setting(
        "",
        "SPARK_CONF",
        "more Spark settings, key=value separated by commas (they win over the job's own)",
    )
    starting_offsets: str = setting(
        "earliest",
        "SPARK_STARTING_OFFSETS",
        "where a query without checkpoint starts (earliest/latest); a checkpoint always wins",
    )
    fail_on_data_loss: bool = setting(
        True,
        "SPARK_FAIL_ON_DATA_LOSS",
        "fail when input offsets vanished (topic recreated, retention) instead of "
        "silently skipping them; compaction gaps and transaction markers are fine",
    )
    marker_topic: str = setting(
        "machinedata.commit-markers",
        "MARKER_TOPIC",
        "compacted topic of exactly-once commit markers (one key per query)",
    )
    query_name: str = setting(
        "",
        "SPARK_QUERY_NAME",
        "query name: names the checkpoint, the transactional.id and the marker key "
        "(default: the job's own name)",
    )
    max_future: timedelta = setting(
        timedelta(hours=1),
        "SPARK_MAX_FUTURE",
        "set aside (late topic, future_timestamp) a record this far ahead of the batch's "
        "processing time, so a bad clock moves no event-time clock; as BRIDGE_MAX_FUTURE",
    )
    available_now: bool = setting(
        False,
        "SPARK_AVAILABLE_NOW",
        "process what is in the input topic now, emit, and exit 0 (a backfill: a batch run "
        "of the streaming job)",
    )
    sink: Literal["driver", "executors"] = setting(
        "driver",
        "SPARK_SINK",
        "where the exactly-once sink writes from: driver (each batch collected, one transaction) "
        "or executors (each task its output partition, a transaction per partition and batch; "
        "docs/exactly-once.md)",
    )
    sink_partitions: int = setting(
        2,
        "SPARK_SINK_PARTITIONS",
        "output partitions of the executors' sink; part of the query's identity: change "
        "it only on a fresh checkpoint or after a clean stop",
    )
    transaction_timeout: timedelta = setting(
        timedelta(minutes=1),
        "SPARK_TRANSACTION_TIMEOUT",
        "Kafka transaction timeout; must stay below the broker's "
        "transaction.max.timeout.ms (15 min by default)",
        was="SPARK_TRANSACTION_TIMEOUT_MS",
    )

    def extra_spark_conf(self) -> dict[str, str]:
        """SPARK_CONF as a dict; a pair without '=' is a configuration error."""
        pairs = [p.strip() for p in self.spark_conf.split(",") if p.strip()]
        bad = [p for p in pairs if "=" not in p]
        if bad:
            raise ConfigError("SPARK_CONF", f"{', '.join(bad)} not key=value")
        return {key.strip(): value.strip() for key, value in (p.split("=", 1) for p in pairs)}

    def query(self, default_name: str) -> str:
        """The query name in effect: the configured one or the job's default."""
        return self.query_name or default_name

    def checkpoint_for(self, query: str) -> Path:
        """Per query, so two jobs (or two test runs) never share a checkpoint."""
        return (
            Path(self.checkpoint_dir).expanduser()
            if self.checkpoint_dir
            else self.run_dir / "checkpoints" / query
        )

    def private_checkpoint(self, query: str) -> Path:
        """The query's checkpoint directory, made or tightened to 0700 (its state holds the
        pipeline's data), and the run directory's ``checkpoints`` with it when it is the
        default one; a configured one's parent is the user's to choose."""
        checkpoint = self.checkpoint_for(query)
        if not self.checkpoint_dir:
            private_directory(checkpoint.parent)
        return private_directory(checkpoint)


@dataclass(frozen=True)
class IdleSettings(SparkJobSettings):
    """The idle timeout the join and the windows share, the one exception to outputs being a
    function of the data alone (docs/windows.md, docs/join.md), and the bounds of every job's
    per-thing state: how long a silent thing is kept, how many names it may have
    (docs/operators.md)."""

    idle_timeout: timedelta = setting(
        timedelta(minutes=5),
        "AGGREGATE_IDLE_TIMEOUT",
        "processing time after a key's last record at which its open windows and the join's "
        "pending pairs are emitted anyway ('off': never; always off with --available-now)",
        allow_zero=True,
    )

    state_retention: timedelta = setting(
        timedelta(days=7),
        "STATE_RETENTION",
        "processing time without a record after which a key emits what it still owes and is "
        "dropped from the state ('off': kept for ever; off with the idle timeout)",
        allow_zero=True,
    )

    max_quantities: int = setting(
        1000,
        "THING_MAX_QUANTITIES",
        "quantity names a thing keeps state for, admitted in the order their first record "
        "arrives; the records of any further name go to the late topic as 'quantity_limit' "
        "(0: no limit)",
    )

    def idle_flush(self) -> timedelta:
        """The idle timeout in effect: off (zero) with --available-now, as a backfill must not
        depend on how long it took."""
        return timedelta(0) if self.available_now else self.idle_timeout

    def retention(self) -> timedelta:
        """The state retention in effect: only with the idle flush, whose timers it rides and
        whose bound on a late timer (a job that was not running) it shares."""
        return self.state_retention if self.idle_flush() else timedelta(0)


@dataclass(frozen=True)
class StatisticsSettings(IdleSettings):
    """The operation statistics' settings: they run beside the join, in the join job or the
    single pass, so both read them (docs/operation-statistics.md)."""

    opstats_power: str = setting(
        "actSpeed_*:vaTorque_*:mechanical_power",
        "OPSTATS_POWER",
        "the power whose operation statistics are computed per component, "
        "LEFT:RIGHT[:result] with one * in each name (what * stands for is the component); "
        "computed beside the join in either shape; empty: none (docs/operation-statistics.md)",
    )
    machine_catalogue: str = setting(
        "",
        "MACHINE_CATALOGUE",
        "the machine catalogue (YAML, or CSV by its suffix) with each component's rated power, "
        "bands, duty rating and physical bound (examples/machine-catalogue.yaml); empty: the "
        "defaults for every component",
    )
    opstats_cycle: timedelta = setting(
        timedelta(minutes=10),
        "OPSTATS_CYCLE",
        "the reference cycle of the duty cycle, the energy and the band times (IEC 60034-1 S3)",
    )
    opstats_max_hold: timedelta = setting(
        timedelta(seconds=60),
        "OPSTATS_MAX_HOLD",
        "how long an input's value holds after its record; longer without one is no data",
    )
    opstats_overload_time: timedelta = setting(
        timedelta(seconds=60),
        "OPSTATS_OVERLOAD_TIME",
        "a reference cycle with longer than this above the rated power is overloaded and fires "
        "an overload alert, as one above the duty rating does ('off': the duty rating only)",
        allow_zero=True,
    )
    opstats_partner_timeout: timedelta = setting(
        timedelta(minutes=5),
        "OPSTATS_PARTNER_TIMEOUT",
        "hand an input's records back once the other input is this far ahead in event time, "
        "instead of waiting for them ('off': wait)",
        allow_zero=True,
    )


@dataclass(frozen=True)
class JoinSettings(StatisticsSettings):
    kafka_username: str = login_as("kafka", "spark-join")
    metrics_port: int = serves_metrics_on(9203)
    pairs: str = setting(
        "actSpeed_*:vaTorque_*:mechanical_power",
        "JOIN_PAIRS",
        "pairs joined per thing: left:right[:result] separated by commas, a '*' in both names "
        "joining every component; results: " + ", ".join(sorted(RESULT_FUNCTIONS)),
    )
    max_gap: timedelta = setting(
        timedelta(0),
        "JOIN_MAX_GAP",
        "only pairs with |left - right| <= this ('off': no limit)",
        allow_zero=True,
        was="JOIN_MAX_GAP_MS",
    )
    allowed_disorder: timedelta = setting(
        timedelta(0),
        "JOIN_ALLOWED_DISORDER",
        "reorder records up to this much event time per stream ('off': strict, late)",
        allow_zero=True,
        was="JOIN_ALLOWED_DISORDER_MS",
    )
    partner_timeout: timedelta = setting(
        timedelta(0),
        "JOIN_PARTNER_TIMEOUT",
        "emit pairs once the other stream is this far ahead of a silent partner ('off': never)",
        allow_zero=True,
        was="JOIN_PARTNER_TIMEOUT_MS",
    )


#: The window settings, in the order :func:`windowing.parse_windows` takes them.
WINDOW_VARIABLES = ("AGGREGATE_TUMBLING", "AGGREGATE_SLIDING", "AGGREGATE_SESSION_GAP")


@dataclass(frozen=True)
class WindowSettings(IdleSettings):
    """The window rules, shared by the aggregate job and the single pass."""

    tumbling: str = setting(
        "10s", "AGGREGATE_TUMBLING", "tumbling window sizes, comma separated ('off': none)"
    )
    sliding: str = setting(
        "",
        "AGGREGATE_SLIDING",
        "sliding windows as SIZE/SLIDE, comma separated, e.g. 60s/10s (default: none)",
    )
    session_gap: str = setting(
        "",
        "AGGREGATE_SESSION_GAP",
        "session windows: a (thing, quantity) session ends after this long without a "
        "record, e.g. 30s; comma separated for several (default: none)",
    )
    allowed_lateness: timedelta = setting(
        timedelta(seconds=10),
        "AGGREGATE_ALLOWED_LATENESS",
        "how far behind its key's newest event time a record may arrive and still "
        "count ('0': none); raise it for machines whose data arrives out of order",
        allow_zero=True,
    )

    def __post_init__(self) -> None:
        """The window specs are text (one setting lists several), parsed by the windowing
        library; they are checked here, when the settings load, like every other value."""
        super().__post_init__()
        texts = (self.tumbling, self.sliding, self.session_gap)
        for index, env in enumerate(WINDOW_VARIABLES):  # each alone: the error names its variable
            alone = [text if i == index else "" for i, text in enumerate(texts)]
            if texts[index].strip().lower() in {"", "off", "none"}:
                continue
            try:
                parse_windows(*alone)
            except ValueError as exc:
                raise ConfigError(env, str(exc)) from None
        try:
            parse_windows(*texts)
        except ValueError as exc:
            raise ConfigError("/".join(WINDOW_VARIABLES), str(exc)) from None

    def window_rules(self, same_by_row_id: bool = False) -> WindowRules:
        specs = parse_windows(self.tumbling, self.sliding, self.session_gap)
        return WindowRules(
            tuple(specs),
            self.allowed_lateness,
            self.max_future,
            same_by_row_id=same_by_row_id,
        )


@dataclass(frozen=True)
class AggregateSettings(WindowSettings):
    kafka_username: str = login_as("kafka", "spark-aggregate")
    metrics_port: int = serves_metrics_on(9204)
    source: str = setting(
        "raw",
        "AGGREGATE_SOURCE",
        "raw: each measured quantity of the raw topic; joined: each join result of the joined "
        "topic (e.g. mechanical_power) as a quantity",
    )

    def window_rules(self, same_by_row_id: bool | None = None) -> WindowRules:
        """Joined input shares event times between pairs: there the row id tells records apart."""
        return super().window_rules(
            self.source == "joined" if same_by_row_id is None else same_by_row_id
        )

    @property
    def default_query(self) -> str:
        return "aggregate" if self.source == "raw" else f"aggregate-{self.source}"


@dataclass(frozen=True)
class SinglePassSettings(JoinSettings, WindowSettings):
    """The join's pairs and the aggregate's windows, in one query over the raw topic."""

    kafka_username: str = login_as("kafka", "spark-single-pass")
    metrics_port: int = serves_metrics_on(9206)
    state: Literal["auto", "executors", "driver"] = setting(
        "auto",
        "SPARK_STATE",
        "where the things' state lives: driver (one table in the driver, which also encodes "
        "and produces the outputs; the state must fit in the driver; needs SPARK_SINK=driver), "
        "executors (Spark's state store, partitioned by thing over the executors), or auto "
        "(where SPARK_SINK writes from); part of the query's identity: change it only on a "
        "fresh checkpoint (docs/spark-jobs.md)",
    )

    def placed_state(self) -> Literal["executors", "driver"]:
        """SPARK_STATE resolved by the deployment's settings alone: auto keeps the state where
        the sink writes from (each deployment sets SPARK_SINK: the driver on one machine, the
        executors on the scaled-out stack). Never from what a checkpoint holds, so the same
        settings always place it alike."""
        if self.state != "auto":
            return self.state
        return "driver" if self.sink == "driver" else "executors"

    def state_in_driver(self) -> bool:
        return self.placed_state() == "driver"
