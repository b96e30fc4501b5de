"""The launcher's CA and server certificate: a real TLS handshake (Python's ssl on a loopback
socket) proves clients that trust the CA accept the server under each of its names and refuse
it under another name or with another CA; the private keys are 0600 from the start."""

from __future__ import annotations

import dataclasses
import socket
import ssl
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from stacktools.stack import certs
from stacktools.stack.settings import Settings
from streamkit.errors import ConfigError


def settings_in(run_dir: Path, **changes: Any) -> Settings:
    return dataclasses.replace(
        Settings.from_sources(environ={"STACK_RUN_DIR": str(run_dir)}), **changes
    )


def handshake(paths: certs.TlsFiles, ca: Path, server_name: str) -> None:
    """One TLS handshake on 127.0.0.1: the server presents ``paths``' certificate, the client
    trusts ``ca`` and expects ``server_name``. Raises the client's ssl error."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(paths.server_cert, paths.server_key)
    client_context = ssl.create_default_context(cafile=str(ca))
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            connection, _ = listener.accept()
            try:
                with server_context.wrap_socket(connection, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass  # the client refused us: its error is the one the test looks at

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                with client_context.wrap_socket(raw, server_hostname=server_name):
                    pass
        finally:
            server.join(10)


def test_the_server_certificate_is_valid_for_its_names_and_only_those(tmp_path: Path) -> None:
    settings = settings_in(tmp_path, tls_hostnames="plant-gateway.example, 10.1.2.3")
    paths = certs.ensure(settings)
    for name in ("127.0.0.1", "localhost", "kafka", "plant-gateway.example", "10.1.2.3"):
        handshake(paths, paths.ca, name)
    with pytest.raises(ssl.SSLCertVerificationError, match="match|mismatch"):
        handshake(paths, paths.ca, "somewhere-else.example")


def test_a_client_with_another_ca_refuses_the_server(tmp_path: Path) -> None:
    paths = certs.ensure(settings_in(tmp_path / "ours"))
    stranger = certs.ensure(settings_in(tmp_path / "theirs"))
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        handshake(paths, stranger.ca, "127.0.0.1")


def test_keys_are_private_and_the_directory_closed(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    paths = certs.ensure(settings)
    assert stat.S_IMODE(certs.tls_dir(settings).stat().st_mode) == 0o700
    for key in (paths.server_key, paths.server_keystore, certs.tls_dir(settings) / "ca-key.pem"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


def serial(path: Path) -> int:
    return x509.load_pem_x509_certificate(path.read_bytes()).serial_number


def test_rotation_renews_the_server_certificate_and_keeps_the_ca(tmp_path: Path) -> None:
    settings = settings_in(tmp_path / "run")
    paths = certs.ensure(settings)
    first_server, first_ca = serial(paths.server_cert), serial(paths.ca)
    assert serial(certs.ensure(settings).server_cert) == first_server  # idempotent
    rotated = certs.ensure(settings, rotate=True)
    assert serial(rotated.ca) == first_ca
    assert serial(rotated.server_cert) != first_server
    handshake(rotated, rotated.ca, "127.0.0.1")
    old_ca = tmp_path / "old-ca.pem"
    old_ca.write_bytes(paths.ca.read_bytes())
    renewed = certs.ensure(settings, rotate_ca=True)
    assert serial(renewed.ca) != first_ca
    handshake(renewed, renewed.ca, "127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(renewed, old_ca, "127.0.0.1")


def test_a_new_name_renews_the_certificate(tmp_path: Path) -> None:
    paths = certs.ensure(settings_in(tmp_path))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(paths, paths.ca, "added-later.example")
    renewed = certs.ensure(settings_in(tmp_path, tls_hostnames="added-later.example"))
    handshake(renewed, renewed.ca, "added-later.example")


def test_a_users_own_certificates_are_used_as_given(tmp_path: Path) -> None:
    theirs = certs.ensure(settings_in(tmp_path / "their-pki"))
    settings = settings_in(
        tmp_path / "run",
        tls_ca_file=str(theirs.ca),
        tls_server_cert_file=str(theirs.server_cert),
        tls_server_key_file=str(theirs.server_key),
    )
    before = {p: p.read_bytes() for p in (theirs.ca, theirs.server_cert, theirs.server_key)}
    paths = certs.ensure(settings)
    assert (paths.ca, paths.server_cert, paths.server_key) == (
        theirs.ca,
        theirs.server_cert,
        theirs.server_key,
    )
    assert {p: p.read_bytes() for p in before} == before
    assert not (certs.tls_dir(settings) / "ca-key.pem").exists()
    handshake(paths, paths.ca, "localhost")


def test_an_own_ca_without_a_server_certificate_is_a_configuration_error(tmp_path: Path) -> None:
    theirs = certs.ensure(settings_in(tmp_path / "their-pki"))
    with pytest.raises(ConfigError, match="TLS_SERVER_CERT_FILE"):
        certs.ensure(settings_in(tmp_path / "run", tls_ca_file=str(theirs.ca)))


def test_publish_gives_the_containers_everything_but_the_ca_key(tmp_path: Path) -> None:
    """compose's certs job: the shared volume holds the CA, the chain and the keys (Kafka's, the
    schema registry's and Mosquitto's owned by their images' users, not ours) but never
    the CA's key; a second publish after a rotation replaces the files in place."""
    settings = settings_in(tmp_path / "run")
    out = tmp_path / "volume"
    owners = {"keystore_owner": 4242, "registry_key_owner": 4343}
    published = certs.publish(certs.ensure(settings), out, **owners)
    assert sorted(p.name for p in out.iterdir()) == [
        "ca.pem",
        "kafka-keystore.pem",
        "mosquitto-key.pem",
        "schema-registry-key.pem",
        "server-key.pem",
        "server.pem",
    ]
    assert stat.S_IMODE(out.stat().st_mode) == 0o755
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes == {
        "ca.pem": 0o644,
        "server.pem": 0o644,
        "server-key.pem": 0o400,
        "kafka-keystore.pem": 0o400,
        "schema-registry-key.pem": 0o400,
        "mosquitto-key.pem": 0o400,
    }
    assert published.server_keystore.stat().st_uid == 4242
    registry_key = out / certs.REGISTRY_KEY
    assert registry_key.stat().st_uid == 4343
    assert registry_key.read_bytes() == published.server_key.read_bytes()
    mosquitto_key = out / certs.MOSQUITTO_KEY
    assert mosquitto_key.stat().st_uid == certs.MOSQUITTO_IMAGE_UID
    assert mosquitto_key.read_bytes() == published.server_key.read_bytes()
    handshake(published, published.ca, "kafka")
    before = serial(published.server_cert)
    again = certs.publish(certs.ensure(settings, rotate=True), out, **owners)
    assert serial(again.server_cert) != before
    handshake(again, again.ca, "mosquitto")
    keystore = again.server_keystore.read_bytes()
    assert keystore.startswith(again.server_key.read_bytes())
    assert keystore.endswith(again.server_cert.read_bytes())
    assert registry_key.read_bytes() == again.server_key.read_bytes()
