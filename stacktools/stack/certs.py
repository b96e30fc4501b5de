"""The local stack's certificate authority: one CA the clients trust and one server certificate
that Kafka, Mosquitto and InfluxDB present, made by the launcher (and compose's provisioning
job) on first start and rotatable by one command. A user's own CA and server certificate can be
given instead (TLS_CA_FILE, TLS_SERVER_CERT_FILE, TLS_SERVER_KEY_FILE); then nothing is made.

Private keys are written with mode 0600 from the first byte (``os.open``), in a 0700 directory.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from stacktools.stack.settings import Settings
from streamkit.cli import HelpFormatter, entry_point, program_name
from streamkit.errors import ConfigError
from streamkit.paths import private_directory, private_file

#: Names every generated server certificate carries: the loopback addresses the local stack binds
#: and the host names compose gives its services.
DEFAULT_NAMES = (
    "127.0.0.1",
    "::1",
    "localhost",
    "kafka",
    # the `cluster` profile's other Kafka nodes
    "kafka-2",
    "kafka-3",
    "mosquitto",
    "influxdb",
    "schema-registry",
)
CA_DAYS = 3650
SERVER_DAYS = 825
#: A server certificate this close to its end is renewed at the next start.
RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class TlsFiles:
    """Where the stack's servers find their key and certificate, and clients the CA."""

    ca: Path
    server_cert: Path
    server_key: Path
    #: The key followed by the certificate chain, the layout of Kafka's PEM key store.
    server_keystore: Path


def tls_dir(settings: Settings) -> Path:
    return settings.run_dir / "tls"


def server_names(settings: Settings) -> list[str]:
    extra = [name.strip() for name in settings.tls_hostnames.split(",") if name.strip()]
    return list(dict.fromkeys([*DEFAULT_NAMES, *extra]))


def files(settings: Settings) -> TlsFiles:
    directory = tls_dir(settings)
    return TlsFiles(
        ca=settings.ca_path,
        server_cert=Path(settings.tls_server_cert_file or directory / "server.pem"),
        server_key=Path(settings.tls_server_key_file or directory / "server-key.pem"),
        server_keystore=directory / "server-keystore.pem",
    )


def ensure(settings: Settings, *, rotate: bool = False, rotate_ca: bool = False) -> TlsFiles:
    """The stack's TLS files, made where missing: a CA (unless the user gave one), a server
    certificate for :func:`server_names` signed by it (unless given), renewed when ``rotate``,
    near its end or missing a name; and Kafka's key store from the two."""
    paths = files(settings)
    directory = private_directory(tls_dir(settings))
    own_ca = not settings.tls_ca_file
    own_server = not settings.tls_server_cert_file
    ca_key_path = directory / "ca-key.pem"
    if own_ca and (rotate_ca or not paths.ca.exists() or not ca_key_path.exists()):
        _write_ca(paths.ca, ca_key_path)
        rotate = True
    if own_server and (rotate or _needs_renewal(paths.server_cert, server_names(settings))):
        if not ca_key_path.exists():
            raise ConfigError(
                "TLS_SERVER_CERT_FILE",
                "with your own CA (TLS_CA_FILE) give the servers' certificate and key too "
                "(TLS_SERVER_CERT_FILE, TLS_SERVER_KEY_FILE): this launcher cannot sign for it",
            )
        _write_server(paths, ca_key_path, server_names(settings))
    with private_file(paths.server_keystore) as out:
        out.write(paths.server_key.read_bytes() + paths.server_cert.read_bytes())
    return paths


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "machinedata stack"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def write_self_signed(
    cert_path: Path, key_path: Path, common_name: str, valid_for: dt.timedelta, *, ca: bool
) -> None:
    """A new key and a certificate it signs itself: the stack's CA (``ca``: may sign server
    certificates), or a certificate no client trusts (a listener that must refuse everyone)."""
    key = _key()
    now = dt.datetime.now(dt.UTC)
    name = _name(common_name)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + valid_for)
    )
    if ca:
        builder = (
            builder.add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
        )
    with private_file(key_path) as out:
        out.write(_pem_key(key))
    cert_path.write_bytes(
        builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    )


def _write_ca(cert_path: Path, key_path: Path) -> None:
    now = dt.datetime.now(dt.UTC)
    name = f"machinedata local CA {now:%Y-%m-%d %H:%M}"
    write_self_signed(cert_path, key_path, name, dt.timedelta(days=CA_DAYS), ca=True)


def _alternative_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _write_server(paths: TlsFiles, ca_key_path: Path, names: list[str]) -> None:
    ca_cert = x509.load_pem_x509_certificate(paths.ca.read_bytes())
    ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{ca_key_path}: not the EC key this tool makes")
    key = _key()
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=SERVER_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([_alternative_name(n) for n in names]), critical=False
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    with private_file(paths.server_key) as out:
        out.write(_pem_key(key))
    # the chain: servers send the CA along (clients that pin only the CA still verify)
    paths.server_cert.write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + ca_cert.public_bytes(serialization.Encoding.PEM)
    )


def _needs_renewal(cert_path: Path, names: list[str]) -> bool:
    if not cert_path.exists():
        return True
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    if cert.not_valid_after_utc - dt.datetime.now(dt.UTC) < RENEW_BEFORE:
        return True
    try:
        present = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return True
    return {str(value) for value in present.get_values_for_type(x509.DNSName)} | {
        str(value) for value in present.get_values_for_type(x509.IPAddress)
    } != {str(_alternative_name(n).value) for n in names}


#: The uid Kafka runs as in the apache/kafka image (its ``appuser``): the owner of the key store
#: :func:`publish` writes for it.
KAFKA_IMAGE_UID = 1000
#: The uid the apicurio/apicurio-registry image runs as: the owner of the copy of the server key
#: :func:`publish` writes for the schema registry (compose's `registry` profile).
REGISTRY_IMAGE_UID = 1001
#: That copy's name in the published directory.
REGISTRY_KEY = "schema-registry-key.pem"
#: The uid of the eclipse-mosquitto image's ``mosquitto``, which the broker drops to before it
#: reads its key: the owner of the copy :data:`MOSQUITTO_KEY`.
MOSQUITTO_IMAGE_UID = 1883
MOSQUITTO_KEY = "mosquitto-key.pem"


def publish(
    paths: TlsFiles,
    out: Path,
    *,
    keystore_owner: int = KAFKA_IMAGE_UID,
    registry_key_owner: int = REGISTRY_IMAGE_UID,
) -> TlsFiles:
    """Copy what compose's servers and clients need into ``out``, a volume they mount read-only,
    without the CA's key (it stays in the volume of the job that signs): the CA and the server
    chain readable by all, the server key for InfluxDB (which runs as root), Kafka's key store
    owned by ``keystore_owner``, and copies of the key owned by ``registry_key_owner``
    (:data:`REGISTRY_KEY`) and by Mosquitto's user (:data:`MOSQUITTO_KEY`): each server runs
    as that user, which alone may read its key. Every key 0400 from the first byte."""
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)  # servers of several users enter it; the keys inside stay theirs alone
    published = TlsFiles(
        ca=out / "ca.pem",
        server_cert=out / "server.pem",
        server_key=out / "server-key.pem",
        server_keystore=out / "kafka-keystore.pem",
    )
    for source, target in ((paths.ca, published.ca), (paths.server_cert, published.server_cert)):
        replace_file(target, source.read_bytes(), 0o644)
    key, keystore = paths.server_key.read_bytes(), paths.server_keystore.read_bytes()
    replace_file(published.server_key, key, 0o400)
    replace_file(published.server_keystore, keystore, 0o400, keystore_owner)
    replace_file(out / REGISTRY_KEY, key, 0o400, registry_key_owner)
    replace_file(out / MOSQUITTO_KEY, key, 0o400, MOSQUITTO_IMAGE_UID)
    return published


def replace_file(target: Path, content: bytes, mode: int, owner: int | None = None) -> None:
    """``target`` swapped in whole (a server restarting meanwhile reads the old file or the new
    one, never half of one), created with ``mode``, chowned to ``owner`` before the swap."""
    temporary = target.with_name(f".{target.name}.new")
    temporary.unlink(missing_ok=True)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(content)
    os.chmod(temporary, mode)  # the umask may have taken bits of a public file
    if owner is not None and owner != os.geteuid():
        os.chown(temporary, owner, -1)
    os.replace(temporary, target)


def describe(paths: TlsFiles) -> str:
    cert = x509.load_pem_x509_certificate(paths.server_cert.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return (
        f"CA {paths.ca}; server certificate {paths.server_cert} for "
        f"{', '.join(str(n.value) for n in names)}, valid until {cert.not_valid_after_utc:%Y-%m-%d}"
    )


@entry_point("stacktools.stack.certs")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program_name("stacktools.stack.certs"),
        description="Make the local stack's CA and server certificate where missing, or renew "
        "them. Restart the stack afterwards (python -m stacktools.stack down, then up) so the "
        "servers present the new certificate.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "--rotate", action="store_true", help="a new server key and certificate (same CA)"
    )
    parser.add_argument(
        "--rotate-ca",
        action="store_true",
        help="a new CA as well: every client must be given the new ca.pem",
    )
    parser.add_argument(
        "--publish",
        metavar="DIR",
        type=Path,
        help="also copy the CA, the server certificate and keys, but not the CA's key, into DIR "
        "(compose's certs job: a volume the servers and clients mount)",
    )
    parser.add_argument(
        "--keystore-owner",
        metavar="UID",
        type=int,
        default=KAFKA_IMAGE_UID,
        help="with --publish: the user Kafka runs as, who alone may read its key store",
    )
    parser.add_argument(
        "--registry-key-owner",
        metavar="UID",
        type=int,
        default=REGISTRY_IMAGE_UID,
        help="with --publish: the user the schema registry runs as, who alone may read its copy "
        "of the server key",
    )
    settings, args = Settings.parse(argv, parser=parser)
    paths = ensure(settings, rotate=args.rotate, rotate_ca=args.rotate_ca)
    if args.publish:
        paths = publish(
            paths,
            args.publish,
            keystore_owner=args.keystore_owner,
            registry_key_owner=args.registry_key_owner,
        )
    print(describe(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
