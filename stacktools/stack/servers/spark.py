"""The launcher's Spark standalone cluster: the master and its workers, and the master's URL
for the jobs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from stacktools.stack.servers.base import Component, http_get
from stacktools.stack.servers.site import ConfigFiles, Site, properties_file
from stacktools.stack.settings import Settings
from streamkit.sizes import format_size


def spark_home() -> Path:
    """The pinned pyspark distribution: its ``bin/spark-class`` starts master and workers."""
    import pyspark

    return Path(pyspark.__file__).parent


class SparkCluster(Component):
    """What the master and the workers share: the pinned distribution, a generated shared
    secret (``spark.authenticate``; handed over in the environment, never on a command line),
    127.0.0.1 for every listener, and a properties file."""

    start_timeout_s = 90.0
    main_class = ""

    def missing_install(self) -> str | None:
        if not (spark_home() / "bin" / "spark-class").exists():
            return f"spark-class not found in {spark_home()}: run scripts/setup.sh"
        return None if shutil.which("java") else "java not found: install a Java 17 runtime"

    def prepare(self) -> None:
        super().prepare()
        self.require_passwords("spark", ("cluster",))
        self.write_config()

    #: The master's and the workers' properties file (``--properties-file``).
    PROPERTIES = "spark.conf"

    def config_files(self, site: Site) -> ConfigFiles:
        """The master's and the workers' properties (compose's too): the shared secret checked
        (it comes in the environment), no REST submission port, old applications' files
        cleaned, and each application capped at two cores, so that two streaming applications
        can share the workers (without a cap the first takes every core)."""
        properties = {
            "spark.authenticate": "true",
            "spark.master.rest.enabled": "false",
            "spark.worker.cleanup.enabled": "true",
            "spark.ui.showConsoleProgress": "false",
            "spark.deploy.defaultCores": "2",
        }
        return {self.PROPERTIES: properties_file(properties)}

    @property
    def properties_file(self) -> Path:
        return self.conf_dir / self.PROPERTIES

    def env(self) -> dict[str, str]:
        return {
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",  # the UI binds there too
            "_SPARK_AUTH_SECRET": self.settings.credential("spark", "cluster").reveal(),
            "SPARK_LOG_DIR": str(self.data_dir),
            "SPARK_WORKER_DIR": str(self.data_dir / "work"),
        }

    def spark_class(self, *args: str) -> list[str]:
        return [
            str(spark_home() / "bin" / "spark-class"),
            self.main_class,
            "--host",
            "127.0.0.1",
            "--properties-file",
            str(self.properties_file),
            *args,
        ]

    def master_status(self) -> dict:
        """The master's JSON status (``status``, ``workers``), or {} while it does not answer."""
        code, body = http_get(f"http://127.0.0.1:{self.settings.spark_master_ui_port}/json/")
        try:
            return json.loads(body) if code == 200 else {}
        except ValueError:
            return {}


def spark_master_url(settings: Settings) -> str:
    """The launcher's Spark standalone master, as SPARK_MASTER names it."""
    return f"spark://127.0.0.1:{settings.spark_master_port}"


def scaled_out_spark_env(settings: Settings) -> dict[str, str]:
    """The Spark stages' environment of the scaled-out shape: the jobs run on the launcher's
    cluster and write their outputs from the executors."""
    return {"SPARK_MASTER": spark_master_url(settings), "SPARK_SINK": "executors"}


class SparkMaster(SparkCluster):
    """The Spark standalone master: ``SPARK_MASTER=spark://127.0.0.1:<port>`` runs a job on the
    cluster."""

    name = "spark-master"
    main_class = "org.apache.spark.deploy.master.Master"

    @property
    def ports(self) -> list[int]:
        return [self.settings.spark_master_port, self.settings.spark_master_ui_port]

    @property
    def address(self) -> str:
        return spark_master_url(self.settings)

    def command(self) -> list[str]:
        return self.spark_class(
            "--port",
            str(self.settings.spark_master_port),
            "--webui-port",
            str(self.settings.spark_master_ui_port),
        )

    def healthy(self) -> bool:
        return self.master_status().get("status") == "ALIVE"


class SparkWorker(SparkCluster):
    """Worker ``index`` (1-based) of the local cluster: its cores and memory cap, its own ports,
    healthy once the master lists it alive."""

    main_class = "org.apache.spark.deploy.worker.Worker"

    def __init__(self, settings: Settings, index: int) -> None:
        self.index = index
        self.name = f"spark-worker-{index}"
        super().__init__(settings)

    @property
    def ports(self) -> list[int]:
        return [
            self.settings.spark_master_port + self.index,
            self.settings.spark_master_ui_port + self.index,
        ]

    def command(self) -> list[str]:
        s = self.settings
        return self.spark_class(
            "--port",
            str(self.ports[0]),
            "--webui-port",
            str(self.ports[1]),
            "--cores",
            str(s.spark_worker_cores),
            "--memory",
            format_size(s.spark_worker_memory),
            "--work-dir",
            str(self.data_dir / "work"),
            spark_master_url(s),
        )

    def healthy(self) -> bool:
        return any(
            w.get("port") == self.ports[0] and w.get("state") == "ALIVE"
            for w in self.master_status().get("workers", [])
        )

    def executors(self) -> int:
        """Executors this worker runs now (its own JSON status), 0 while it does not answer."""
        code, body = http_get(f"http://127.0.0.1:{self.ports[1]}/json/")
        try:
            return len(json.loads(body).get("executors", [])) if code == 200 else 0
        except ValueError:
            return 0


def spark_cluster(settings: Settings) -> list[Component]:
    return [
        SparkMaster(settings),
        *(SparkWorker(settings, i) for i in range(1, settings.spark_workers + 1)),
    ]
