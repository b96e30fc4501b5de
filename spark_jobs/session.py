"""The SparkSession every job uses: offline connector jars, settings measured for this stack.

The Kafka connector and spark-avro come from `.stack/jars/spark` (resolved from Maven Central by
scripts/setup.sh) or the jobs' SPARK_EXTRA_JARS_DIR setting (the container image), never from
`--packages`, so jobs start without network access.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from streamkit.logs import log_format
from streamkit.paths import CODE_ROOT, SPARK_JARS_DIR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Both jobs keep their state in RocksDB (transformWithState requires it; for the join it keeps
#: memory flat as things grow). The provider is fixed in a checkpoint at its first start. With
#: changelog checkpointing a batch's commit writes the changed keys, not a RocksDB checkpoint
#: (half the state commit in a live batch; it can be switched on for an existing checkpoint).
ROCKSDB_STATE_STORE = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}

REQUIRED_JARS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "spark-avro_2.13",
    "kafka-clients",
)


#: The PySpark module whose pandas deprecation warning the Python workers are spared.
PANDAS_SERIALIZERS = "pyspark.sql.pandas.serializers"


def connector_jars(directory: Path = SPARK_JARS_DIR) -> list[Path]:
    jars = sorted(directory.glob("*.jar"))
    missing = [
        name for name in REQUIRED_JARS if not any(j.name.startswith(name + "-") for j in jars)
    ]
    if missing:
        raise RuntimeError(
            f"Spark connector jars missing in {directory}: {', '.join(missing)}; "
            "run scripts/setup.sh"
        )
    return jars


def log_config_option(fmt: str | None = None) -> str:
    """The driver JVM's log4j2 configuration for LOG_FORMAT (json or text, next to this
    module): Spark's own lines in the services' format, at WARN, without the warnings that
    repeat per task and mean nothing here. Without it the JVM starts on Spark's defaults and
    prints its own banner lines."""
    path = Path(__file__).with_name(f"log4j2-{fmt or log_format()}.properties")
    return f"-Dlog4j2.configurationFile={path.as_uri()}"


#: What decides where the driver listens (its RPC, block manager and UI, port 4040 and up): a
#: job that sets any of them chooses for itself.
DRIVER_ADDRESS_SETTINGS = ("spark.driver.host", "spark.driver.bindAddress")
LOCAL_IP_ENV = "SPARK_LOCAL_IP"


def loopback_master(master: str) -> bool:
    """``local[...]``, or a standalone master on this machine's loopback (the launcher's)."""
    if master.startswith("local"):
        return True
    host = urlsplit(master).hostname or ""
    return host == "localhost" or host == "::1" or host.startswith("127.")


def loopback_driver(master: str, configured: dict[str, str]) -> dict[str, str]:
    """The driver's settings that keep every one of its listeners on 127.0.0.1 (its UI binds
    to SPARK_LOCAL_IP, everything else to ``spark.driver.bindAddress``), for a master on this
    machine; none where the executors are elsewhere (they connect to the driver), or where the
    job or its environment chose the driver's address itself."""
    chosen = os.environ.get(LOCAL_IP_ENV) or any(k in configured for k in DRIVER_ADDRESS_SETTINGS)
    if chosen or not loopback_master(master):
        return {}
    return {key: "127.0.0.1" for key in DRIVER_ADDRESS_SETTINGS}


def _private_properties(properties: dict[str, str]) -> Path:
    """A properties file only this user can read (mkstemp creates it 0600)."""
    fd, name = tempfile.mkstemp(prefix="spark-", suffix=".conf")
    with os.fdopen(fd, "w") as handle:
        handle.writelines(f"{key} {value}\n" for key, value in properties.items())
    return Path(name)


def build_session(
    app_name: str,
    master: str = "local[2]",
    shuffle_partitions: int | None = None,
    extra: dict[str, str] | None = None,
    jars_dir: Path = SPARK_JARS_DIR,
    driver_java_options: str = "",
    cluster_secret: str = "",
    log_format: str | None = None,
) -> SparkSession:
    """``log_format``: the driver JVM's log lines, json or text like the Python ones (default:
    LOG_FORMAT). On a master of this machine every listener of the driver binds 127.0.0.1
    (:func:`loopback_driver`). ``cluster_secret``: a standalone cluster's shared secret
    (``spark.authenticate``); Spark takes it only from its configuration, so it reaches the JVM
    in a private properties file, never on a command line (the worker hands it to executors in
    their environment)."""
    from pyspark.sql import SparkSession

    # Python workers (pandas UDFs, state functions) must use this interpreter, not whatever
    # `python3` is on PATH (no pyarrow there); a cluster's own setting is kept.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # PySpark's own pandas code trips a pandas deprecation warning in every Python worker it
    # starts: nothing this stack can act on (the workers inherit this environment)
    os.environ.setdefault("PYTHONWARNINGS", f"ignore::FutureWarning:{PANDAS_SERIALIZERS}")
    logging.getLogger("py4j").setLevel(logging.WARNING)  # py4j logs every callback at INFO
    cores = os.cpu_count() or 2
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.jars", ",".join(str(j) for j in connector_jars(jars_dir)))
        # 200 (the default) RocksDB stores committed per stateful batch made batches ~23x slower
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or cores))
        # PySpark's daemon without its per-task re-read of zip archives (see the module)
        .config("spark.python.daemon.module", "spark_jobs.python_daemon")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # A driver killed while writing its first offset log entry leaves only the write's
        # temporary file; with no entry Spark starts the query anew and, with this check on,
        # refuses forever because the offsets directory is not empty (a crash loop the chaos
        # round found). No entry means no batch ran: nothing of a state or commit to protect.
        .config("spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart", "false")
    )
    secret_file: Path | None = None
    submit_args = os.environ.get(
        "PYSPARK_SUBMIT_ARGS"
    )  # the caller's, put back once the JVM started
    if master.startswith("spark://"):
        # executors' Python workers import the jobs (and the daemon module above) from where
        # this driver imports them: the checkout, or site-packages
        builder = builder.config("spark.executorEnv.PYTHONPATH", str(CODE_ROOT))
        if cluster_secret:
            secret_file = _private_properties(
                {"spark.authenticate": "true", "spark.authenticate.secret": cluster_secret}
            )
            os.environ["PYSPARK_SUBMIT_ARGS"] = f"--properties-file {secret_file} pyspark-shell"
    # before the JVM starts: PySpark hands the builder's settings to spark-submit
    java_options = " ".join(
        part for part in (log_config_option(log_format), driver_java_options) if part
    )
    builder = builder.config("spark.driver.extraJavaOptions", java_options)
    loopback = loopback_driver(master, extra or {})
    if loopback:  # the UI reads only the environment, which the JVM inherits at its start
        os.environ[LOCAL_IP_ENV] = "127.0.0.1"
    for key, value in {**loopback, **(extra or {})}.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    finally:
        if loopback:
            os.environ.pop(LOCAL_IP_ENV, None)
        if secret_file is not None:  # read once, at the JVM's start
            if submit_args is None:
                os.environ.pop("PYSPARK_SUBMIT_ARGS", None)
            else:
                os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args
            secret_file.unlink(missing_ok=True)
    session.sparkContext.setLogLevel("WARN")
    return session
