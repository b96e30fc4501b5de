"""How the stack's clients trust its servers: one SSL context for every Python client that
speaks TLS with the standard library or takes an :class:`ssl.SSLContext`.
"""

from __future__ import annotations

import ssl

from streamkit.config import ServiceSettings
from streamkit.errors import ConfigError


def client_context(settings: ServiceSettings) -> ssl.SSLContext | None:
    """With TLS on: a context that trusts only ``settings.ca_path`` (not the system's CAs),
    requires the server's certificate and checks that it names the host connected to (TLS 1.2
    at least, Python's defaults). With TLS off: None, a plain connection.

    A missing CA file is a :class:`ConfigError` naming ``TLS_CA_FILE``: the launcher makes the
    default one on its first start."""
    if not settings.tls:
        return None
    try:
        context = ssl.create_default_context(cafile=str(settings.ca_path))
    except FileNotFoundError:
        raise ConfigError(
            "TLS_CA_FILE",
            f"no CA certificate at {settings.ca_path} (the stack launcher makes it when it starts "
            "with TLS on; or give your own, or TLS=false for servers without TLS)",
        ) from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
