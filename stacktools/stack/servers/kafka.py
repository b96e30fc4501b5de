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
from stacktools.stack.servers.site import ConfigFiles, Site, properties_file
from stacktools.stack.settings import Settings
from streamkit.deadline import TimedOut, wait_until
from streamkit.kafka_io import BROKER_SESSION_S, LEADER_CHANGE_S, REPLICA_LAG_MAX_S
from streamkit.paths import KAFKA_JARS_DIR, private_directory, private_file

KAFKA_VERSION = "4.3.1"


#: The broker's heap: the launcher's, and compose's (KAFKA_HEAP_OPTS) alike; set, because the
#: official image's kafka-server-start.sh would otherwise fix it at 1 GiB from the start.
KAFKA_HEAP = ("-Xms256m", "-Xmx1g")
#: How often a node deletes segments past their topic's retention (Kafka's default: 5 min).
RETENTION_CHECK_MS = 10_000


class Kafka(Component):
    """One Apache Kafka node in KRaft combined mode (broker + controller), transactions on.
    ``KAFKA_BROKERS`` nodes form one controller quorum; with three, every topic (data,
    transaction state, offsets) has three replicas and needs two in sync to accept a write."""

    name = "kafka"
    start_timeout_s = 90.0

    def __init__(
        self, settings: Settings, node: int = 1, cluster_id: str = "", host_port: int = 0
    ) -> None:
        self.node = node
        #: compose's (KAFKA_CLUSTER_ID); the launcher makes one (:attr:`cluster_id_file`)
        self.cluster_id = cluster_id
        #: compose's: the host port its client listener is published on (0: the launcher's)
        self.host_port = host_port
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
        s = self.settings
        self.write_config()
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

    #: Inside a compose container: the listener for the other containers, the one published
    #: on the host, the controller's.
    COMPOSE_PORTS = {"internal": 19092, "host": 9092, "controller": 9093}

    def _listener_properties(self, site: Site) -> dict[str, str]:
        """Where this node listens and how it is reached. On this host one client listener on
        127.0.0.1; in compose one for the other containers (its service name) and one for the
        host (127.0.0.1 and the port compose publishes), each node's controller by its name."""
        s = self.settings
        nodes = [Kafka(s, node) for node in range(1, s.kafka_brokers + 1)]
        protocol = self.protocol
        if site.in_compose:
            ports = self.COMPOSE_PORTS
            voters = [f"{n.node}@{n.name}:{ports['controller']}" for n in nodes]
            host_port = self.host_port or s.kafka_node_ports[self.node - 1]
            return {
                "listeners": f"INTERNAL://:{ports['internal']},HOST://:{ports['host']},"
                f"CONTROLLER://:{ports['controller']}",
                "advertised.listeners": f"INTERNAL://{self.name}:{ports['internal']},"
                f"HOST://127.0.0.1:{host_port}",
                "controller.quorum.voters": ",".join(voters),
                "inter.broker.listener.name": "INTERNAL",
                "listener.security.protocol.map": f"INTERNAL:{protocol},HOST:{protocol},"
                f"CONTROLLER:{protocol}",
            }
        client_port, controller_port = self.ports
        voters = [f"{n.node}@127.0.0.1:{self.controller_port(n.node)}" for n in nodes]
        return {
            "listeners": f"CLIENT://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"CLIENT://127.0.0.1:{client_port}",
            "controller.quorum.voters": ",".join(voters),
            "inter.broker.listener.name": "CLIENT",
            "listener.security.protocol.map": f"CONTROLLER:{protocol},CLIENT:{protocol}",
        }

    @staticmethod
    def client_listeners(site: Site) -> list[str]:
        """The listeners clients log in on with SCRAM (the broker's own too)."""
        return ["internal", "host"] if site.in_compose else ["client"]

    def properties(self, site: Site) -> dict[str, str]:
        """This node's ``server.properties`` for ``site``."""
        s = self.settings
        if s.kafka_brokers < 1:
            raise LauncherError(f"KAFKA_BROKERS must be at least 1, not {s.kafka_brokers}")
        replicas, min_insync = self.replication
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node),
            **self._listener_properties(site),
            "controller.listener.names": "CONTROLLER",
            **self._auth_properties(site),
            **self._tls_properties(site),
            "log.dirs": str(site.data_dir),
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
            # the tools' readers wait out a dead follower by this bound, the partition tests a
            # cut-off broker by the second (streamkit.kafka_io)
            "replica.lag.time.max.ms": str(int(REPLICA_LAG_MAX_S * 1000)),
            "broker.session.timeout.ms": str(int(BROKER_SESSION_S * 1000)),
            # compaction and deletion by age observable within tests, hanging transactions
            # aborted within a minute
            "log.cleaner.backoff.ms": "1000",
            "log.retention.check.interval.ms": str(RETENTION_CHECK_MS),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "10000",
            "transaction.max.timeout.ms": "900000",
            "message.max.bytes": str(16 * 1024 * 1024 + 1024),
        }

    def config_files(self, site: Site) -> ConfigFiles:
        """``server.properties`` and the log's configuration (to the console only); in compose
        also the storage tool's arguments (the first start formats the storage with the admin's
        SCRAM credential), the healthcheck's client settings and ``kafka.env``, the start
        scripts' environment, which the entry point (docker/kafka/entrypoint.sh) reads: the
        heap, set (the image's script would fix 1 GiB), the log configuration, and no GC log
        (the image's scripts would write both logs into the container's layer, unbounded)."""
        self.require_passwords("kafka", ("admin", "controller"))
        server = site.conf_dir / "server.properties"
        log4j = site.conf_dir / "log4j2.properties"
        files = {
            server.name: properties_file(self.properties(site)),
            log4j.name: LOG4J_PROPERTIES.encode(),
        }
        if not site.in_compose:
            return files
        if not self.cluster_id:
            raise LauncherError("kafka: compose's configuration needs the cluster id")
        files["storage-format.args"] = self.format_arguments(server, self.cluster_id).encode()
        files["admin-client.properties"] = properties_file(self._admin_client(site))
        start = {
            "KAFKA_HEAP_OPTS": " ".join(KAFKA_HEAP),
            "KAFKA_LOG4J_OPTS": f"-Dlog4j2.configurationFile={log4j}",
            "EXTRA_ARGS": "-name kafkaServer",  # without -loggc
        }
        files["kafka.env"] = "".join(f"export {k}='{v}'\n" for k, v in start.items()).encode()
        return files

    def _admin_client(self, site: Site) -> dict[str, str]:
        """The admin's client settings (compose's healthcheck), over the client listener."""
        from streamkit.kafka_clients import SASL_MECHANISM, jaas_config

        settings = {
            "security.protocol": self.protocol,
            "sasl.mechanism": SASL_MECHANISM,
            "sasl.jaas.config": jaas_config(
                "admin", self.settings.credential("kafka", "admin").reveal()
            ),
        }
        if site.tls:
            settings |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(site.tls.ca)}
        return settings

    NODES_MARKER = "cluster-nodes"
    AUTH_MARKER = "scram-users-created"

    @property
    def protocol(self) -> str:
        """Both listeners' (client and controller): SASL over TLS when the clients speak TLS
        (TLS on, or KAFKA_SECURITY_PROTOCOL=SASL_SSL for Kafka alone), else over plain TCP."""
        from streamkit.kafka_clients import uses_tls

        return "SASL_SSL" if uses_tls(self.settings) else "SASL_PLAINTEXT"

    def _tls_properties(self, site: Site) -> dict[str, str]:
        """Kafka's PEM stores: the key store is the server key followed by its certificate chain
        (unencrypted key, so no key password), the trust store the CA. They serve every listener
        and the broker's own clients (to the other nodes' client and controller listeners), which
        verify the host name like any client: 127.0.0.1 and the service names are in the
        certificate."""
        if self.protocol != "SASL_SSL":
            return {}
        paths = site.tls or certs.files(self.settings)
        if not site.in_compose and not (paths.server_keystore.exists() and paths.ca.exists()):
            paths = certs.ensure(self.settings)  # `stack up` made them; a bare prepare() may not
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(paths.server_keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(paths.ca),
            "ssl.endpoint.identification.algorithm": "https",
            "ssl.client.auth": "none",
        }

    def _auth_properties(self, site: Site) -> dict[str, str]:
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
        admin = jaas_config("admin", s.credential("kafka", "admin").reveal())
        clients: dict[str, str] = {}
        for listener in self.client_listeners(site):
            clients[f"listener.name.{listener}.sasl.enabled.mechanisms"] = SASL_MECHANISM
            clients[f"listener.name.{listener}.{SASL_MECHANISM.lower()}.sasl.jaas.config"] = admin
        return {
            "sasl.enabled.mechanisms": SASL_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SASL_MECHANISM,
            **clients,
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
        arguments = self.conf_dir / "storage-format.args"
        try:
            with private_file(arguments) as out:
                text = self.format_arguments(self.conf_dir / "server.properties", cluster_id)
                out.write(text.encode())
            result = subprocess.run(
                self._java(f"@{arguments}"), capture_output=True, text=True, timeout=120
            )
        finally:
            arguments.unlink(missing_ok=True)
        if result.returncode != 0:
            raise LauncherError(f"kafka storage format failed:\n{result.stdout}\n{result.stderr}")
        (self.data_dir / self.AUTH_MARKER).write_text("admin\n")

    def format_arguments(self, server_properties: Path, cluster_id: str) -> str:
        """The storage tool's arguments, its first user (the admin, with a SCRAM credential)
        among them, as a Java argument file: the launcher and compose's entry point run
        ``java @file``, so no command line that ``ps`` shows holds the password. (The launcher
        deletes the file right after.) ``--cluster-id=ID`` in one word: a random id may begin
        with "-", which the tool would take for an option of its own."""
        admin_password = self.settings.credential("kafka", "admin").reveal()
        return java_argument_file(
            "kafka.tools.StorageTool",
            "format",
            "--ignore-formatted",
            f"--cluster-id={cluster_id}",
            "-c",
            str(server_properties),
            "--add-scram",
            f"SCRAM-SHA-512=[name=admin,password={admin_password}]",
        )

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
        registered and serving: a topic with three replicas cannot be created on fewer
        brokers, and a request sent to a node that does not serve waits out its timeout."""
        from stacktools.stack.kafka_access import grant_prefixes, retire_users, upsert_users
        from stacktools.stack.topics import ProvisionReport, load_topic_specs, provision
        from streamkit.kafka_clients import admin_client
        from streamkit.kafka_io import retry_transient

        if self.node != 1:
            return
        everyone = set(range(1, self.settings.kafka_brokers + 1))
        try:
            wait_until(
                lambda: self.registered_nodes() >= everyone and self.serving_nodes() >= everyone,
                self.start_timeout_s,
                "every Kafka node registered and serving",
                interval_s=1,
            )
        except TimedOut:
            raise LauncherError(
                f"kafka: only nodes {sorted(self.serving_nodes())} of {sorted(everyone)} "
                f"serving after {self.start_timeout_s:.0f} s (see the kafka-N logs)"
            ) from None
        self.require_passwords("kafka", USERS["kafka"])

        def set_up_cluster() -> ProvisionReport:
            # held until the results are in: a dropped client cancels them
            admin = admin_client(self.settings)
            upsert_users(admin, self.settings)
            retire_users(admin)
            grant_prefixes(admin)
            return provision(self.settings, load_topic_specs(self.settings))

        # every step is idempotent; a node that dies between the wait above and a request
        # leaves that request unanswered (KRaft names a random registered node as the
        # controller), so it is sent again while a leader change may still be under way
        report = retry_transient(set_up_cluster, LEADER_CHANGE_S)
        for line in report.drift:
            print(f"[stack] topic drift: {line}")

    def serving_nodes(self) -> set[int]:
        """The cluster's nodes that answer on their own address and list themselves. A node's
        registration alone is no proof: a killed node stays registered until its session times
        out, and an admin request sent to it waits out its whole timeout."""
        peers = [
            self if node == self.node else Kafka(self.settings, node)
            for node in range(1, self.settings.kafka_brokers + 1)
        ]
        return {peer.node for peer in peers if peer.healthy()}


#: The launcher's broker log: warnings, and the line that says the node started.
LOG4J_PROPERTIES = (
    "status = warn\n"
    "appender.out.type = Console\nappender.out.name = STDOUT\n"
    "appender.out.layout.type = PatternLayout\n"
    "appender.out.layout.pattern = [%d] %p %m (%c)%n\n"
    "rootLogger.level = info\nrootLogger.appenderRef.out.ref = STDOUT\n"
    "logger.kafka.name = kafka\nlogger.kafka.level = warn\n"
    "logger.kafkaorg.name = org.apache.kafka\nlogger.kafkaorg.level = warn\n"
    "logger.started.name = kafka.server.KafkaRaftServer\nlogger.started.level = info\n"
)


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
