"""The launcher's Mosquitto: its password file, ACL and configuration, the version it needs,
machine users added while it runs, and its health (an MQTT login)."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
from pathlib import Path

from stacktools.stack.access import MACHINE_PATTERNS, MQTT_RIGHTS, USERS
from stacktools.stack.errors import LauncherError
from stacktools.stack.mqtt_users import machine_passwords, password_line
from stacktools.stack.process import ManagedProcess
from stacktools.stack.servers.base import Component
from stacktools.stack.servers.site import ConfigFiles, Site
from streamkit.paths import find_program, private_directory, private_file

# Mosquitto writes its persistence snapshot this often: a crash (not a clean stop) loses the
# messages that arrived since and were not taken by their subscriber (docs/exactly-once.md, 6).
MOSQUITTO_AUTOSAVE_S = 5


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
        self.write_config()

    #: Inside a compose container: the one listener.
    COMPOSE_PORT = 8883

    def config_files(self, site: Site) -> ConfigFiles:
        """``mosquitto.conf``, the password file and the ACL; in compose also the healthcheck's
        login (``mosquitto_pub`` reads its options from ``$XDG_CONFIG_HOME/mosquitto_pub``, so
        the admin's password is on no command line)."""
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
        passwords = {
            **{user: s.credential("mqtt", user).reveal() for user in service_users},
            **machine_passwords(s),
        }
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
        where = f"{self.COMPOSE_PORT}" if site.in_compose else f"{s.mqtt_port} 127.0.0.1"
        lines = [
            f"listener {where}",
            *self._tls_lines(site),
            "allow_anonymous false",
            f"password_file {site.conf_dir / 'passwd'}",
            f"acl_file {site.conf_dir / 'acl'}",
            "persistence true",
            f"persistence_location {site.data_dir}/",
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
            # each connection and why it ended: what an operator asks first
            "log_type information",
            "connection_messages true",
        ]
        if not site.in_compose and os.geteuid() == 0:
            # otherwise it switches to 'mosquitto' and cannot read our run dir
            lines.append("user root")
        files = {
            "mosquitto.conf": ("\n".join(lines) + "\n").encode(),
            "passwd": "".join(f"{password_line(u, p)}\n" for u, p in passwords.items()).encode(),
            "acl": rights.encode(),
        }
        if site.in_compose:
            admin = s.credential("mqtt", "admin").reveal()
            files["healthcheck/mosquitto_pub"] = f"-u admin\n-P {admin}\n".encode()
        return files

    def _tls_lines(self, site: Site) -> list[str]:
        """The listener's TLS (none with TLS off): the stack's certificate chain and key."""
        if site.tls is None:
            return []
        return [
            f"cafile {site.tls.ca}",
            f"certfile {site.tls.server_cert}",
            f"keyfile {site.tls.server_key}",
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
