"""The launcher's schema registry (Apicurio): its configuration (compose's too), start and
health, and every topic's schema registered once it answers."""

from __future__ import annotations

from pathlib import Path

from stacktools.stack.servers.base import Component, stack_tls_get
from stacktools.stack.servers.site import ConfigFiles, Site, properties_file
from stacktools.stack.settings import Settings
from streamkit.paths import APICURIO_DIR

#: The registry's heap and collector: the launcher's, and compose's alike. The official image's
#: launcher (run-java.sh) adds a collector of its own before JAVA_OPTS_APPEND unless
#: GC_CONTAINER_OPTIONS names one, and two collectors stop the JVM; so compose gives the heap in
#: JAVA_OPTS_APPEND and the collector in GC_CONTAINER_OPTIONS.
REGISTRY_HEAP = ("-Xms128m", "-Xmx512m")
REGISTRY_GC = "-XX:+UseSerialGC"
REGISTRY_JVM_OPTIONS = (*REGISTRY_HEAP, REGISTRY_GC)


def registry_properties(
    *, host: str, port: int, database: Path, tls: tuple[Path, Path] | None
) -> dict[str, str]:
    """Apicurio's (Quarkus's) configuration: ``registry.properties``, which Quarkus reads as one
    more source of its configuration (``quarkus.config.locations``: the launcher's -D option,
    compose's QUARKUS_CONFIG_LOCATIONS). ``tls``: (certificate chain, key), then HTTPS only."""
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

    #: Inside a compose container: the registry's port.
    COMPOSE_PORT = 8085
    #: The file of :func:`registry_properties`, in the site's configuration directory.
    PROPERTIES = "registry.properties"

    def prepare(self) -> None:
        super().prepare()
        self.write_config()

    def config_files(self, site: Site) -> ConfigFiles:
        """:func:`registry_properties` for ``site``: every interface of the container in compose
        (published on 127.0.0.1 of the host only), 127.0.0.1 here; the H2 file in its data
        directory."""
        s = self.settings
        if site.in_compose:
            host, port = "0.0.0.0", self.COMPOSE_PORT
        else:
            host, port = "127.0.0.1", s.schema_registry_port
        properties = registry_properties(
            host=host,
            port=port,
            database=site.data_dir / "registry",
            tls=(site.tls.server_cert, site.tls.server_key) if site.tls else None,
        )
        return {self.PROPERTIES: properties_file(properties)}

    def command(self) -> list[str]:
        return [
            "java",
            *REGISTRY_JVM_OPTIONS,
            f"-Dquarkus.config.locations={self.conf_dir / self.PROPERTIES}",
            f"-Djava.io.tmpdir={self.conf_dir}",
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
