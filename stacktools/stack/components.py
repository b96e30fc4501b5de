"""The servers of the local stack and how each is configured, started and checked.

Each writes its generated configuration under ``<run dir>/<name>/``, its data under
``<run dir>/data/<name>/`` and its log to ``<run dir>/logs/<name>.log``. Everything binds to
127.0.0.1 only.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path

from stacktools import certs
from stacktools.access import INFLUX_RIGHTS, MACHINE_PATTERNS, MQTT_RIGHTS, USERS
from stacktools.credentials import new_cluster_id
from stacktools.influx import InfluxClient, InfluxError, basic_auth
from stacktools.mqtt_users import machine_passwords, password_line, write_password_file
from stacktools.stack import influx_bootstrap
from stacktools.stack.errors import LauncherError
from stacktools.stack.influx_bootstrap import Bootstrap, bootstrap_files
from stacktools.stack.process import ManagedProcess, port_open
from streamkit.config import Settings, credential_env
from streamkit.deadline import TimedOut, wait_until
from streamkit.errors import ConfigError
from streamkit.paths import (
    APICURIO_DIR,
    KAFKA_JARS_DIR,
    REPO_ROOT,
    find_influxd,
    find_program,
    private_directory,
    private_file,
)
from streamkit.sizes import format_size
from streamkit.tls import client_context

KAFKA_VERSION = "4.3.1"
# Mosquitto writes its persistence snapshot this often: a crash (not a clean stop) loses the
# messages that arrived since and were not taken by their subscriber (docs/exactly-once.md, 6).
MOSQUITTO_AUTOSAVE_S = 5


def http_get(
    url: str,
    timeout_s: float = 2.0,
    auth: tuple[str, str] | None = None,
    context: ssl.SSLContext | None = None,
) -> tuple[int, bytes]:
    """(status, body); (0, b"") when nothing answered or the server failed the TLS checks of
    ``context`` (with https)."""
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", basic_auth(*auth))
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError):
        return 0, b""


def stack_tls_get(settings: Settings, url: str) -> tuple[int, bytes]:
    """:func:`http_get` trusting the stack's CA (when TLS is on); (0, b"") while there is no CA
    yet: a run directory the launcher has not started, so whatever answers is not ours."""
    try:
        context = client_context(settings)
    except ConfigError:
        return 0, b""
    return http_get(url, context=context)


class Component:
    """A server the launcher owns. Subclasses fill in configuration, command and health."""

    name = ""
    start_timeout_s = 60.0

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.conf_dir = settings.run_dir / self.name
        self.data_dir = settings.run_dir / "data" / self.name

    @property
    def ports(self) -> list[int]:
        raise NotImplementedError

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ports[0]}"

    def missing_install(self) -> str | None:
        """Why this server cannot run here (not installed), or None."""
        return None

    def prepare(self) -> None:
        """Write configuration (always regenerated, so port changes take effect). Both
        directories are the stack user's alone (0700): configurations hold passwords, data
        directories the pipeline's data."""
        private_directory(self.conf_dir)
        private_directory(self.data_dir.parent)  # <run dir>/data
        private_directory(self.data_dir)

    def command(self) -> list[str]:
        raise NotImplementedError

    def healthy(self) -> bool:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """Environment the server needs besides the launcher's own."""
        return {}

    def after_healthy(self) -> None:
        """One-time bootstrap once the server answers (users, databases, topics)."""

    def require_passwords(self, system: str, users: Iterable[str]) -> None:
        missing = [
            credential_env(system, user)
            for user in users
            if not self.settings.credential(system, user)
        ]
        if missing:
            raise LauncherError(
                f"{self.name}: no password in the environment, .env or "
                f"{self.settings.credentials_path} for {', '.join(missing)}"
            )


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
            # topics are created with the broker's default replication (stacktools.topics)
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
            "-Xms256m",
            "-Xmx1g",
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
        from stacktools.kafka_access import grant_prefixes, retire_users, upsert_users
        from stacktools.topics import load_topic_specs, provision
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


#: Before it, Mosquitto moved up to a whole in-flight window of queued messages into flight on
#: every PUBACK, so a client coming back to a backlog got all of it in flight (and all of it
#: again after a lost connection).
MOSQUITTO_MIN_VERSION = (2, 0, 13)


def mosquitto_version(program: Path) -> tuple[int, ...] | None:
    """The broker's version from its usage text (``mosquitto version 2.0.21``), None if that
    cannot be read (then nothing is refused for it)."""
    try:
        usage = subprocess.run(
            [str(program), "-h"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_mosquitto_version(usage.stdout + usage.stderr)


def parse_mosquitto_version(usage: str) -> tuple[int, ...] | None:
    match = re.search(r"mosquitto version (\d+)\.(\d+)\.(\d+)", usage)
    return tuple(int(part) for part in match.groups()) if match else None


class Mosquitto(Component):
    """Eclipse Mosquitto (Debian), password authentication, anonymous access refused, an ACL
    per user (machines publish under the prefix, the bridge subscribes to it), persistence on
    so QoS 1 sessions survive a broker restart. With TLS on, its one listener speaks only TLS
    (1.2 at least); with MQTT_MACHINE_IDENTITIES each machine user may publish only to its own
    Thing's topic. Each client's queue is bounded (MQTT_MAX_QUEUED_*, MQTT_MAX_INFLIGHT_*)."""

    name = "mosquitto"

    @property
    def ports(self) -> list[int]:
        return [self.settings.mqtt_port]

    @property
    def password_file(self) -> Path:
        return self.conf_dir / "passwd"

    def missing_install(self) -> str | None:
        program = find_program("mosquitto")
        if not program:
            return "mosquitto not found: run scripts/setup.sh (Debian package mosquitto)"
        version = mosquitto_version(program)
        if version is not None and version < MOSQUITTO_MIN_VERSION:
            return (
                f"mosquitto {'.'.join(map(str, version))} ignores MQTT_MAX_INFLIGHT_MESSAGES "
                "towards a client that comes back to a backlog (fixed in "
                f"{'.'.join(map(str, MOSQUITTO_MIN_VERSION))}): run scripts/setup.sh, which "
                "installs a fixed release (on Debian 12 from bookworm-backports)"
            )
        return None

    def prepare(self) -> None:
        # the password hashes and the configuration: for the launcher's user only
        private_directory(self.conf_dir)
        private_directory(self.data_dir)
        s = self.settings
        self.require_passwords("mqtt", USERS["mqtt"])
        for name, count in (
            ("MQTT_MAX_QUEUED_MESSAGES", s.mqtt_max_queued_messages),
            ("MQTT_MAX_INFLIGHT_MESSAGES", s.mqtt_max_inflight_messages),
        ):
            if count < 1:  # Mosquitto's 0 is "unlimited": exactly what the bound is for
                raise LauncherError(f"{name} must be at least 1, not {count}")
        service_users = [
            user
            for user in USERS["mqtt"]
            # with an identity per machine, no login may publish as any machine
            if not (s.mqtt_machine_identities and user == "machine")
        ]
        # Machine users made so far (stack machine-user): without MQTT_MACHINE_IDENTITIES they
        # have no right in the ACL, so they can log in but neither publish nor read.
        write_password_file(
            self.password_file,
            {
                **{user: s.credential("mqtt", user).reveal() for user in service_users},
                **machine_passwords(s),
            },
        )
        rights = "".join(
            f"user {user}\ntopic {access} {topic.format(prefix=s.mqtt_topic_prefix)}\n\n"
            for user, (access, topic) in MQTT_RIGHTS.items()
            if user in service_users
        )
        if s.mqtt_machine_identities:
            # %u: the user's name, a Thing: its own topic, unsharded or under any shard
            rights += "".join(
                f"pattern write {pattern.format(prefix=s.mqtt_topic_prefix)}\n"
                for pattern in MACHINE_PATTERNS
            )
        acl = self.conf_dir / "acl"
        acl.write_text(rights)
        lines = [
            f"listener {s.mqtt_port} 127.0.0.1",
            *self._tls_lines(),
            "allow_anonymous false",
            f"password_file {self.password_file}",
            f"acl_file {acl}",
            "persistence true",
            f"persistence_location {self.data_dir}/",
            f"autosave_interval {MOSQUITTO_AUTOSAVE_S}",
            # Bounded, so that a subscriber that is away (the bridge's persistent session) cannot
            # take the broker's memory: past the bound Mosquitto drops that client's newer
            # messages (docs/mqtt-bridge.md, "Mosquitto's bounds").
            f"max_queued_messages {s.mqtt_max_queued_messages}",
            f"max_queued_bytes {s.mqtt_max_queued_bytes}",
            # MQTT 3.1.1 persistent sessions end after a week offline
            "persistent_client_expiration 7d",
            # towards the bridge, which acks only after Kafka confirmed
            f"max_inflight_messages {s.mqtt_max_inflight_messages}",
            f"max_inflight_bytes {s.mqtt_max_inflight_bytes}",
            # stderr: unbuffered, so each line is in the log as it happens (stdout into a
            # file reached it only when Mosquitto exited)
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
        ]
        if os.geteuid() == 0:
            # otherwise it switches to 'mosquitto' and cannot read our run dir
            lines.append("user root")
        (self.conf_dir / "mosquitto.conf").write_text("\n".join(lines) + "\n")

    def _tls_lines(self) -> list[str]:
        """The listener's TLS (none with TLS off): the stack's certificate chain and key."""
        s = self.settings
        if not s.tls:
            return []
        files = certs.files(s)
        return [
            f"cafile {files.ca}",
            f"certfile {files.server_cert}",
            f"keyfile {files.server_key}",
            "tls_version tlsv1.2",
        ]

    def add_machine_users(self, users: dict[str, str]) -> bool:
        """Put ``users`` (Thing -> password) into the password file of a prepared Mosquitto and
        make a running one reload it (SIGHUP); the other lines stay as they are. True when a
        running Mosquitto was told."""
        if not self.password_file.exists():
            return False
        kept = [
            line
            for line in self.password_file.read_text(encoding="utf-8").splitlines()
            if line.partition(":")[0] not in users
        ]
        with (
            private_file(self.password_file) as binary,
            io.TextIOWrapper(binary, encoding="utf-8") as out,
        ):
            out.writelines(f"{line}\n" for line in kept)
            out.writelines(f"{password_line(u, p)}\n" for u, p in users.items())
        pid = ManagedProcess(self.name, self.settings.run_dir).pid()
        if pid is None:
            return False
        os.kill(pid, signal.SIGHUP)  # Mosquitto reloads its password file and ACL
        return True

    def command(self) -> list[str]:
        return [str(find_program("mosquitto")), "-c", str(self.conf_dir / "mosquitto.conf")]

    def healthy(self) -> bool:
        from streamkit.errors import ConfigError
        from streamkit.mqtt_client import MqttConnectError, connect, make_client

        try:  # with TLS on, the health check verifies the broker's certificate as clients do
            client = make_client(self.settings, client_id="")
            connect(client, self.settings, timeout_s=2)
        except (MqttConnectError, OSError, ConfigError):  # ConfigError: no CA file (yet)
            return False
        client.disconnect()
        client.loop_stop()
        return True


class InfluxDB(Component):
    """InfluxDB 1.8.10 built from source (pure Go): InfluxQL plus the v2-compatible
    /api/v2/write and /health that influxdb-client needs. Auth on, Flux on; HTTPS with the
    stack's server certificate when TLS is on.

    Its first admin is created by a bootstrap run that no TCP client can talk to
    (:mod:`stacktools.stack.influx_bootstrap`), before the configured port ever opens."""

    name = "influxdb"

    @property
    def ports(self) -> list[int]:
        return [self.settings.influx_port, self.settings.influx_port + 2]

    @property
    def address(self) -> str:
        return self.settings.influx_base_url

    @property
    def config_file(self) -> Path:
        return self.conf_dir / "influxdb.conf"

    @property
    def admin_marker(self) -> Path:
        """Made once this data directory has its admin (and removed with the directory)."""
        return self.data_dir / "admin-created"

    def missing_install(self) -> str | None:
        return (
            None
            if find_influxd()
            else "influxd 1.8.10 not found: run scripts/setup.sh (builds it with go install)"
        )

    def config(self, bootstrap: Bootstrap | None = None) -> str:
        """influxd's configuration; with ``bootstrap``, the bootstrap run's: the HTTP service on
        its private socket, its TCP listener on an ephemeral port refusing every TLS handshake
        (no protocol version between min and max), Flux off, the RPC port ephemeral too."""
        s = self.settings
        https: tuple[Path, Path] | None = None
        if bootstrap:
            rpc, http = "127.0.0.1:0", "127.0.0.1:0"
            https = (bootstrap.certificate, bootstrap.key)
            versions = ("tls1.3", "tls1.2")  # minimum above maximum: no handshake succeeds
        else:
            rpc, http = f"127.0.0.1:{s.influx_port + 2}", f"127.0.0.1:{s.influx_port}"
            if s.tls:
                tls_files = certs.files(s)
                https = (tls_files.server_cert, tls_files.server_key)
            versions = ("tls1.2", "tls1.3")
        lines = [
            "reporting-disabled = true",
            f"bind-address = {_toml(rpc)}",
            "[meta]",
            f"  dir = {_toml(self.data_dir / 'meta')}",
            "[data]",
            f"  dir = {_toml(self.data_dir / 'data')}",
            f"  wal-dir = {_toml(self.data_dir / 'wal')}",
            "  query-log-enabled = false",
            "[http]",
            "  enabled = true",
            f"  bind-address = {_toml(http)}",
            "  auth-enabled = true",
            f"  flux-enabled = {'false' if bootstrap else 'true'}",
            "  log-enabled = false",
            "  max-body-size = 0",
        ]
        if https:
            lines += [
                "  https-enabled = true",
                f"  https-certificate = {_toml(https[0])}",
                f"  https-private-key = {_toml(https[1])}",
            ]
        if bootstrap:
            lines += [
                "  unix-socket-enabled = true",
                f"  bind-socket = {_toml(bootstrap.socket)}",
                '  unix-socket-permissions = "0600"',
            ]
        if https:
            lines += ["[tls]", f"  min-version = {_toml(versions[0])}"]
            lines += [f"  max-version = {_toml(versions[1])}"]
        lines += [
            "[monitor]",
            "  store-enabled = false",
            "[continuous_queries]",
            "  log-enabled = false",
        ]
        return "\n".join(lines) + "\n"

    def prepare(self) -> None:
        """The configuration; on a data directory without its admin, the bootstrap run first."""
        self.require_passwords("influx", (self.settings.influx_username, *INFLUX_RIGHTS))
        private_directory(self.conf_dir)
        private_directory(self.data_dir)
        self.config_file.write_text(self.config())
        if not self.admin_marker.exists():
            self.bootstrap()

    def bootstrap(self) -> None:
        """Create the admin through the bootstrap run's private socket (a data directory from
        before this existed may have one already: then nothing is created)."""
        s = self.settings
        statement = (
            f"CREATE USER \"{s.influx_username}\" WITH PASSWORD '{s.influx_password.reveal()}' "
            "WITH ALL PRIVILEGES"
        )
        with bootstrap_files(self.conf_dir) as files:
            files.config.write_text(self.config(files))
            influx_bootstrap.create_admin(
                ManagedProcess(self.name, s.run_dir),
                [str(find_influxd()), "run", "-config", str(files.config)],
                files,
                statement,
                self.start_timeout_s,
            )
        self.admin_marker.touch(mode=0o600)

    def command(self) -> list[str]:
        return [str(find_influxd()), "run", "-config", str(self.config_file)]

    def healthy(self) -> bool:
        status, body = stack_tls_get(self.settings, f"{self.settings.influx_base_url}/health")
        return status == 200 and b'"pass"' in body

    def after_healthy(self) -> None:
        """The service users with their current passwords, and the database with their rights.
        The admin exists already: made by this launcher's bootstrap run, or by compose's entry
        point (docker/influxdb/entrypoint.sh) the same way; never over TCP, where a stranger
        could make it first."""
        s = self.settings
        client = InfluxClient(s)
        status, _ = client.query("SHOW DATABASES")
        if status in (401, 403):  # 403: "create admin user first"; 401: no such user
            raise LauncherError(
                f"InfluxDB at {self.address} refused the admin's credentials (HTTP {status}); "
                f"its data ({self.data_dir} here, or compose's influxdb-data volume) was made "
                "with other credentials: restore them or remove that data"
            )
        self.require_passwords("influx", INFLUX_RIGHTS)
        _, body = client.query("SHOW USERS")
        existing = {
            row[0]
            for result in body.get("results", [])
            for series in result.get("series", [])
            for row in series.get("values", [])
        }
        try:
            for user in INFLUX_RIGHTS:
                password = s.credential("influx", user).reveal()
                client.execute(
                    f"SET PASSWORD FOR \"{user}\" = '{password}'"
                    if user in existing
                    else f"CREATE USER \"{user}\" WITH PASSWORD '{password}'",
                    f"create user {user}",
                )
            client.create_database(s.influx_database)
        except InfluxError as exc:
            raise LauncherError(str(exc)) from None


def _toml(value: object) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(str(value))


#: The alert rules, the same file for the local stack and compose (unit tests beside it).
ALERT_RULES = REPO_ROOT / "prometheus" / "alerts.yml"

#: How Alertmanager batches notifications: the first of a group after ``group_wait``, changes
#: to it (a new alert, a resolved one) at most every ``group_interval``. docs/operations.md
#: states the delays these give; the live alert test holds the stack to them.
ALERT_ROUTE_TIMING = {"group_wait": "10s", "group_interval": "30s", "repeat_interval": "4h"}


#: The labels that make an overload alert itself (alert_forwarder.alerts.labels).
OVERLOAD_GROUP = ("alertname", "thing", "component", "rating", "overload_since")


def alert_route(receiver: str) -> dict[str, object]:
    """Alertmanager's routing: every alert grouped by alert and service, each component's
    overload alert its own group (notified once firing, once resolved). Compose's entry point
    writes the same (docker/alertmanager/entrypoint.sh; a test holds the two equal)."""
    return {
        "receiver": receiver,
        "group_by": ["alertname", "service"],
        **ALERT_ROUTE_TIMING,
        "routes": [
            {"matchers": ['alertname="ComponentOverload"'], "group_by": list(OVERLOAD_GROUP)}
        ],
    }


class Alertmanager(Component):
    """Alertmanager (Debian) receiving Prometheus's alerts and sending every one, firing and
    resolved, to ALERT_WEBHOOK_URL; without one the alerts only show in its API and page. A
    single instance: its cluster (gossip) listener is off."""

    name = "alertmanager"

    @property
    def ports(self) -> list[int]:
        return [self.settings.alertmanager_port]

    def missing_install(self) -> str | None:
        return (
            None
            if find_program("prometheus-alertmanager")
            else "prometheus-alertmanager not found: run scripts/setup.sh (Debian package)"
        )

    def prepare(self) -> None:
        super().prepare()
        url = self.settings.alert_webhook_url
        receiver: dict[str, object] = {"name": "webhook" if url else "none"}
        if url:
            receiver["webhook_configs"] = [{"url": url, "send_resolved": True}]
        config = {"route": alert_route(str(receiver["name"])), "receivers": [receiver]}
        # the webhook URL may carry a token: the configuration is the owner's only
        with private_file(self.conf_dir / "alertmanager.yml") as out:
            out.write(json.dumps(config, indent=2).encode())

    def command(self) -> list[str]:
        return [
            str(find_program("prometheus-alertmanager")),
            f"--config.file={self.conf_dir / 'alertmanager.yml'}",
            f"--storage.path={self.data_dir}",
            f"--web.listen-address=127.0.0.1:{self.settings.alertmanager_port}",
            "--cluster.listen-address=",  # one instance: no gossip port
        ]

    def healthy(self) -> bool:
        return http_get(f"http://127.0.0.1:{self.settings.alertmanager_port}/-/ready")[0] == 200


class DiskSpace(Component):
    """``python -m stacktools.disk_space`` for the Kafka and InfluxDB data directories of this
    run directory: their filesystems' free space on /metrics, for the disk alert. Its port is
    any free one, chosen at each start and handed to Prometheus as a file target."""

    name = "disk-space"

    @property
    def port_file(self) -> Path:
        return self.conf_dir / "metrics-port"

    @property
    def target_file(self) -> Path:
        return self.settings.run_dir / "prometheus" / "targets" / "disk-space.json"

    @property
    def ports(self) -> list[int]:
        return [int(self.port_file.read_text())] if self.port_file.exists() else []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ports[0]}" if self.ports else "-"

    def watched(self) -> str:
        data = self.settings.run_dir / "data"
        kafka = [node.name for node in kafka_nodes(self.settings)]
        return ",".join(f"{name}={data / name}" for name in [*kafka, "influxdb"])

    def prepare(self) -> None:
        from stacktools.processes import free_port

        super().prepare()
        self.port_file.write_text(f"{free_port()}\n")
        private_directory(self.target_file.parent.parent)
        private_directory(self.target_file.parent)
        self.target_file.write_text(
            json.dumps(
                # the job label as compose's scrape job names it: one alert, the same labels
                [
                    {
                        "targets": [self.address],
                        "labels": {"service": "disk_space", "job": "disk_space"},
                    }
                ],
                indent=2,
            )
        )

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "stacktools.disk_space",
            "--metrics-port",
            str(self.ports[0]),
            "--disk-watch",
            self.watched(),
        ]

    def healthy(self) -> bool:
        return bool(self.ports) and http_get(f"http://{self.address}/healthz")[0] == 200


class Prometheus(Component):
    """Prometheus (Debian) scraping itself, Alertmanager and the targets dropped as JSON files
    into ``<run dir>/prometheus/targets/`` (the pipeline's services while they run, the disk
    reporter); it evaluates :data:`ALERT_RULES` and sends the alerts to the local Alertmanager."""

    name = "prometheus"

    @property
    def ports(self) -> list[int]:
        return [self.settings.prometheus_port]

    def missing_install(self) -> str | None:
        return (
            None
            if find_program("prometheus")
            else "prometheus not found: run scripts/setup.sh (Debian package)"
        )

    def prepare(self) -> None:
        super().prepare()
        (self.conf_dir / "targets").mkdir(exist_ok=True)
        jobs = [
            {
                "job_name": "prometheus",
                "static_configs": [{"targets": [f"127.0.0.1:{self.settings.prometheus_port}"]}],
            }
        ]
        # The pipeline's services are file targets, written by whoever starts them
        # (stacktools.pipeline: the demo, tests, benchmarks) and removed on a clean stop, each
        # with its service and job labels: a pipeline that is not running is no target at all,
        # so it never counts as down.
        jobs.append(
            {
                "job_name": "services",
                "file_sd_configs": [
                    {"files": [str(self.conf_dir / "targets" / "*.json")], "refresh_interval": "5s"}
                ],
            }
        )
        jobs.append(
            {
                "job_name": "alertmanager",
                "static_configs": [{"targets": [f"127.0.0.1:{self.settings.alertmanager_port}"]}],
            }
        )
        config = {
            "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
            "rule_files": [str(ALERT_RULES)],
            "alerting": {
                "alertmanagers": [
                    {
                        "static_configs": [
                            {"targets": [f"127.0.0.1:{self.settings.alertmanager_port}"]}
                        ]
                    }
                ]
            },
            "scrape_configs": jobs,
        }
        # JSON is valid YAML, and needs no YAML writer here
        (self.conf_dir / "prometheus.yml").write_text(json.dumps(config, indent=2))

    def command(self) -> list[str]:
        return [
            str(find_program("prometheus")),
            f"--config.file={self.conf_dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address=127.0.0.1:{self.settings.prometheus_port}",
            # no --web.enable-lifecycle: anyone who reaches the port could stop it (POST /-/quit)
            # or reload it; a new configuration takes effect by a restart through the launcher
            "--storage.tsdb.retention.time=7d",
        ]

    def healthy(self) -> bool:
        return http_get(f"http://127.0.0.1:{self.settings.prometheus_port}/-/ready")[0] == 200


#: The registry's JVM options: the launcher's, and compose's (JAVA_OPTS_APPEND) alike.
REGISTRY_JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC")


def registry_properties(
    *, host: str, port: int, database: Path, tls: tuple[Path, Path] | None
) -> dict[str, str]:
    """Apicurio's (Quarkus's) configuration, written once: the launcher passes it as -D options,
    compose as the environment variables Quarkus maps them from (tests/docker/test_compose.py
    holds the compose file to it). ``tls``: (certificate chain, key), then HTTPS only."""
    properties = {
        "quarkus.http.host": host,
        "quarkus.http.port": str(port),
        "apicurio.storage.kind": "sql",
        "apicurio.storage.sql.kind": "h2",
        # the H2 login is its default: the file sits in a directory only the registry's user reads
        "apicurio.datasource.url": f"jdbc:h2:file:{database}",
    }
    if tls:
        properties |= {
            "quarkus.http.ssl-port": str(port),
            "quarkus.http.insecure-requests": "disabled",
            "quarkus.http.ssl.certificate.files": str(tls[0]),
            "quarkus.http.ssl.certificate.key-files": str(tls[1]),
        }
    return properties


class SchemaRegistry(Component):
    """Apicurio Registry (Quarkus, Java 17) serving the Confluent-compatible API the producers
    register their schemas with and registry-aware consumers read them from. Its storage is H2
    in a file under the data directory, so schema ids survive a restart: records already in Kafka
    keep decoding. HTTPS only, with the stack's server certificate, when TLS is on."""

    name = "schema-registry"
    start_timeout_s = 120.0  # a JVM and Quarkus on a busy 2-core machine

    @property
    def ports(self) -> list[int]:
        return [self.settings.schema_registry_port]

    @property
    def address(self) -> str:
        return self.settings.registry_url

    @property
    def runner_jar(self) -> Path | None:
        jars = sorted(APICURIO_DIR.glob("apicurio-registry-app-*-runner.jar"))
        return jars[-1] if jars else None

    def missing_install(self) -> str | None:
        return (
            None
            if self.runner_jar
            else f"Apicurio Registry not found in {APICURIO_DIR}: run scripts/setup.sh"
        )

    def command(self) -> list[str]:
        tls = certs.files(self.settings) if self.settings.tls else None
        properties = registry_properties(
            host="127.0.0.1",
            port=self.settings.schema_registry_port,
            database=self.data_dir / "registry",
            tls=(tls.server_cert, tls.server_key) if tls else None,
        )
        properties["java.io.tmpdir"] = str(self.conf_dir)
        return [
            "java",
            *REGISTRY_JVM_OPTIONS,
            *(f"-D{key}={value}" for key, value in properties.items()),
            "-jar",
            str(self.runner_jar),
        ]

    def healthy(self) -> bool:
        scheme = "https" if self.settings.tls else "http"
        url = f"{scheme}://127.0.0.1:{self.settings.schema_registry_port}/health/ready"
        return stack_tls_get(self.settings, url)[0] == 200

    def after_healthy(self) -> None:
        """Every topic's schema registered with its compatibility rule now, so consumers find
        them before the first producer starts (each producer registers again: idempotent)."""
        from streamkit.wire.registry import register_all

        register_all(self.settings)


def schema_registry(settings: Settings) -> list[Component]:
    return [SchemaRegistry(settings)] if settings.schema_registry else []


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
        properties = {
            "spark.authenticate": "true",
            "spark.master.rest.enabled": "false",
            "spark.worker.cleanup.enabled": "true",
            "spark.ui.showConsoleProgress": "false",
        }
        self.properties_file.write_text("".join(f"{k} {v}\n" for k, v in properties.items()))

    @property
    def properties_file(self) -> Path:
        return self.conf_dir / "spark.conf"

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


def single(component: type[Component]) -> Callable[[Settings], list[Component]]:
    return lambda settings: [component(settings)]


#: The servers ``up`` starts by default, by group, in start order (``kafka``: KAFKA_BROKERS nodes).
DEFAULT_GROUPS: dict[str, Callable[[Settings], list[Component]]] = {
    "kafka": kafka_nodes,
    "mosquitto": single(Mosquitto),
    "influxdb": single(InfluxDB),
    "disk-space": single(DiskSpace),
    "alertmanager": single(Alertmanager),
    "prometheus": single(Prometheus),
    "schema-registry": schema_registry,  # none unless SCHEMA_REGISTRY is on
}
#: Started only when named (``up spark``): a Spark standalone master and SPARK_WORKERS workers.
OPTIONAL_GROUPS: dict[str, Callable[[Settings], list[Component]]] = {"spark": spark_cluster}
