"""The launcher's Kafka: each KRaft node's configuration, storage format, start and health, and
the users, rights and topics once every node is registered."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from stacktools.compose.credentials import new_cluster_id
from stacktools.stack import certs
from stacktools.stack.access import USERS
from stacktools.stack.errors import LauncherError
from stacktools.stack.process import port_open
from stacktools.stack.servers.base import Component
from stacktools.stack.settings import Settings
from streamkit.deadline import TimedOut, wait_until
from streamkit.paths import KAFKA_JARS_DIR, private_directory, private_file

KAFKA_VERSION = "4.3.1"


#: The broker's heap: the launcher's, and compose's (KAFKA_HEAP_OPTS) alike; set, because the
#: official image's kafka-server-start.sh would otherwise fix it at 1 GiB from the start.
KAFKA_HEAP = ("-Xms256m", "-Xmx1g")


class Kafka(Component):
    """One Apache Kafka node in KRaft combined mode (broker + controller), transactions on.
    ``KAFKA_BROKERS`` nodes form one controller quorum; with three, every topic (data,
    transaction state, offsets) has three replicas and needs two in sync to accept a write."""

    name = "kafka"
    start_timeout_s = 90.0

    def __init__(self, settings: Settings, node: int = 1) -> None:
        self.node = node
        if node > 1:  # node 1 keeps the plain name (and run-dir layout) of a single-node stack
            self.name = f"kafka-{node}"
        super().__init__(settings)

    @property
    def ports(self) -> list[int]:
        return [self.settings.kafka_node_ports[self.node - 1], self.controller_port(self.node)]

    def controller_port(self, node: int) -> int:
        return self.settings.kafka_controller_port + 2 * (node - 1)

    @property
    def replication(self) -> tuple[int, int]:
        """(replication factor, min.insync.replicas) for every topic of this cluster."""
        replicas = min(self.settings.kafka_brokers, 3)
        return replicas, 2 if replicas >= 3 else 1

    @property
    def cluster_id_file(self) -> Path:
        """Shared by every node (node 1's configuration directory): one cluster, one id."""
        return self.settings.run_dir / "kafka" / "cluster.id"

    def missing_install(self) -> str | None:
        if not list(KAFKA_JARS_DIR.glob(f"kafka_2.13-{KAFKA_VERSION}.jar")):
            return f"Kafka {KAFKA_VERSION} jars not found in {KAFKA_JARS_DIR}: run scripts/setup.sh"
        if not shutil.which("java"):
            return "java not found: install a Java 17 runtime"
        return None

    def prepare(self) -> None:
        super().prepare()
        # the configuration holds the JAAS passwords, the data every record: the owner's only
        private_directory(self.conf_dir)
        private_directory(self.data_dir)
        self.require_passwords("kafka", ("admin", "controller"))
        s = self.settings
        if s.kafka_brokers < 1:
            raise LauncherError(f"KAFKA_BROKERS must be at least 1, not {s.kafka_brokers}")
        replicas, min_insync = self.replication
        client_port, controller_port = self.ports
        voters = ",".join(
            f"{n}@127.0.0.1:{self.controller_port(n)}" for n in range(1, s.kafka_brokers + 1)
        )
        properties = {
            "process.roles": "broker,controller",
            "node.id": str(self.node),
            "controller.quorum.voters": voters,
            "listeners": f"CLIENT://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"CLIENT://127.0.0.1:{client_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "CLIENT",
            "listener.security.protocol.map": f"CONTROLLER:{self.protocol},CLIENT:{self.protocol}",
            **self._auth_properties(),
            **self._tls_properties(),
            "log.dirs": str(self.data_dir),
            "num.partitions": str(s.topic_partitions),
            "auto.create.topics.enable": "false",
            # topics are created with the broker's default replication (stacktools.stack.topics)
            "default.replication.factor": str(replicas),
            "min.insync.replicas": str(min_insync),
            "offsets.topic.replication.factor": str(replicas),
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": str(min_insync),
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": str(replicas),
            "share.coordinator.state.topic.min.isr": str(min_insync),
            "group.initial.rebalance.delay.ms": "0",
            # compaction observable within tests, hanging transactions aborted within a minute
            "log.cleaner.backoff.ms": "1000",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
            "transaction.max.timeout.ms": "900000",
            "message.max.bytes": str(16 * 1024 * 1024 + 1024),
        }
        with private_file(self.conf_dir / "server.properties") as out:
            out.write("".join(f"{k}={v}\n" for k, v in properties.items()).encode())
        (self.conf_dir / "log4j2.properties").write_text(
            "status = warn\n"
            "appender.out.type = Console\nappender.out.name = STDOUT\n"
            "appender.out.layout.type = PatternLayout\n"
            "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = info\nrootLogger.appenderRef.out.ref = STDOUT\n"
            "logger.kafka.name = kafka\nlogger.kafka.level = warn\n"
            "logger.kafkaorg.name = org.apache.kafka\nlogger.kafkaorg.level = warn\n"
            "logger.started.name = kafka.server.KafkaRaftServer\nlogger.started.level = info\n"
        )
        nodes_file = self.data_dir / self.NODES_MARKER
        if not (self.data_dir / "meta.properties").exists():
            self._format_storage()
            nodes_file.write_text(f"{s.kafka_brokers}\n")
        elif not (self.data_dir / self.AUTH_MARKER).exists():
            raise LauncherError(
                f"the Kafka data in {self.data_dir} was made before authentication was on and has "
                "no admin user: remove that directory (its topics are lost) and start again"
            )
        elif (
            made_for := int(nodes_file.read_text()) if nodes_file.exists() else 1
        ) != s.kafka_brokers:
            raise LauncherError(
                f"the Kafka data in {self.data_dir} belongs to a cluster of {made_for} node(s), "
                f"not KAFKA_BROKERS={s.kafka_brokers}: use another STACK_RUN_DIR, or remove "
                f"{s.run_dir / 'data'}/kafka* (its topics are lost)"
            )

    NODES_MARKER = "cluster-nodes"
    AUTH_MARKER = "scram-users-created"

    @property
    def protocol(self) -> str:
        """Both listeners' (client and controller): SASL over TLS when the clients speak TLS
        (TLS on, or KAFKA_SECURITY_PROTOCOL=SASL_SSL for Kafka alone), else over plain TCP."""
        from streamkit.kafka_clients import uses_tls

        return "SASL_SSL" if uses_tls(self.settings) else "SASL_PLAINTEXT"

    def _tls_properties(self) -> dict[str, str]:
        """Kafka's PEM stores: the key store is the server key followed by its certificate chain
        (unencrypted key, so no key password), the trust store the CA. They serve both listeners
        and the broker's own clients (to the other nodes' client and controller listeners), which
        verify the host name like any client: 127.0.0.1 is in the certificate."""
        if self.protocol != "SASL_SSL":
            return {}
        paths = certs.files(self.settings)
        if not (paths.server_keystore.exists() and paths.ca.exists()):
            paths = certs.ensure(self.settings)  # `stack up` made them; a bare prepare() may not
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(paths.server_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(paths.ca),
            "ssl.endpoint.identification.algorithm": "https",
            "ssl.client.auth": "none",
        }

    def _auth_properties(self) -> dict[str, str]:
        """SCRAM-SHA-512 for clients (users live in the cluster metadata, created by the
        launcher), PLAIN with one static user on the controller listener (SCRAM cannot
        authenticate the controller, which holds the users), ACLs enforced, only the admin
        and the controller are super users; nothing is allowed without an ACL."""
        from streamkit.kafka_clients import SASL_MECHANISM, jaas_config

        s = self.settings
        controller = s.credential("kafka", "controller").reveal()
        plain = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="controller" password="{controller}" user_controller="{controller}";'
        )
        return {
            "sasl.enabled.mechanisms": SASL_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SASL_MECHANISM,
            "listener.name.client.sasl.enabled.mechanisms": SASL_MECHANISM,
            f"listener.name.client.{SASL_MECHANISM.lower()}.sasl.jaas.config": jaas_config(
                "admin", s.credential("kafka", "admin").reveal()
            ),
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": plain,
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:admin;User:controller",
            "allow.everyone.if.no.acl.found": "false",
        }

    def _java(self, *main_class_and_args: str) -> list[str]:
        return [
            "java",
            *KAFKA_HEAP,
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.conf_dir / 'log4j2.properties'}",
            "-cp",
            f"{KAFKA_JARS_DIR}/*",
            *main_class_and_args,
        ]

    def _format_storage(self) -> None:
        if self.node == 1 or not self.cluster_id_file.exists():
            self.cluster_id_file.parent.mkdir(parents=True, exist_ok=True)
            self.cluster_id_file.write_text(new_cluster_id())
        cluster_id = self.cluster_id_file.read_text().strip()
        admin_password = self.settings.credential("kafka", "admin").reveal()
        # The admin's password is an argument of the storage tool: it goes into a Java argument
        # file (0600, deleted right after), so the command line that `ps` shows is `java ...
        # @file`. `--cluster-id=ID` in one word: a random id may begin with "-", which the tool
        # would take for an option of its own when given as a separate argument.
        arguments = self.conf_dir / "storage-format.args"
        try:
            with private_file(arguments) as out:
                out.write(
                    java_argument_file(
                        "kafka.tools.StorageTool",
                        "format",
                        f"--cluster-id={cluster_id}",
                        "-c",
                        str(self.conf_dir / "server.properties"),
                        "--add-scram",
                        f"SCRAM-SHA-512=[name=admin,password={admin_password}]",
                    ).encode()
                )
            result = subprocess.run(
                self._java(f"@{arguments}"), capture_output=True, text=True, timeout=120
            )
        finally:
            arguments.unlink(missing_ok=True)
        if result.returncode != 0:
            raise LauncherError(f"kafka storage format failed:\n{result.stdout}\n{result.stderr}")
        (self.data_dir / self.AUTH_MARKER).write_text("admin\n")

    def command(self) -> list[str]:
        return self._java("kafka.Kafka", str(self.conf_dir / "server.properties"))

    @property
    def address(self) -> str:
        """This node's client address: the local node's port, or, where KAFKA_BOOTSTRAP_SERVERS
        names the servers (compose's provisioning job: kafka:19092), the node-th of them."""
        given = [server for server in self.settings.kafka_bootstrap_servers.split(",") if server]
        return given[self.node - 1] if len(given) >= self.node else f"127.0.0.1:{self.ports[0]}"

    def registered_nodes(self) -> set[int]:
        """The node ids this node's metadata lists as live brokers (asked on its own address)."""
        from confluent_kafka.admin import AdminClient  # imported late: `stack status` stays fast

        from streamkit.kafka_clients import client_config

        host, _, port = self.address.rpartition(":")
        if not port_open(int(port), host):
            return set()
        # log_level 0: a broker that is still starting is expected here, not worth a log line
        try:  # without a password (a run dir of its own), the client cannot even be made
            admin = AdminClient(
                {
                    **client_config(self.settings, "stack-health"),
                    "bootstrap.servers": self.address,
                    "socket.timeout.ms": 2000,
                    "log_level": 0,
                }
            )
            return set(admin.list_topics(timeout=2).brokers)
        except Exception:  # noqa: BLE001 - any failure means "not (yet) healthy"
            return set()

    def healthy(self) -> bool:
        return self.node in self.registered_nodes()

    def after_healthy(self) -> None:
        """Users, rights and topics, once per cluster (node 1) and only when every node is
        registered: a topic with three replicas cannot be created on fewer brokers."""
        from stacktools.stack.kafka_access import grant_prefixes, retire_users, upsert_users
        from stacktools.stack.topics import load_topic_specs, provision
        from streamkit.kafka_clients import admin_client

        if self.node != 1:
            return
        everyone = set(range(1, self.settings.kafka_brokers + 1))
        try:
            wait_until(
                lambda: self.registered_nodes() >= everyone,
                self.start_timeout_s,
                "every Kafka node registered",
                interval_s=1,
            )
        except TimedOut:
            raise LauncherError(
                f"kafka: only nodes {sorted(self.registered_nodes())} of {sorted(everyone)} "
                f"registered after {self.start_timeout_s:.0f} s (see the kafka-N logs)"
            ) from None
        self.require_passwords("kafka", USERS["kafka"])
        # held until the results are in: a dropped client cancels them
        admin = admin_client(self.settings)
        upsert_users(admin, self.settings)
        retire_users(admin)
        grant_prefixes(admin)
        report = provision(self.settings, load_topic_specs(self.settings.topic_partitions))
        for line in report.drift:
            print(f"[stack] topic drift: {line}")


def java_argument_file(*arguments: str) -> str:
    """The text of a Java launcher argument file (``java @file``) holding ``arguments``, one a
    line, each in double quotes: inside them the launcher reads a backslash as an escape (of a
    backslash, a quote, or n, r, t, f for the control characters), and nothing splits a word or
    comments it out."""
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}
    return "".join(
        '"' + "".join(escapes.get(char, char) for char in argument) + '"\n'
        for argument in arguments
    )


def kafka_nodes(settings: Settings) -> list[Component]:
    return [Kafka(settings, node) for node in range(1, max(settings.kafka_brokers, 1) + 1)]
