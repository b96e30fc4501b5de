"""Where a server runs, as its configuration must name it: the launcher's process on this host,
or a container of the compose stack. Each component renders its configuration for either
(``python -m stacktools.stack render`` writes compose's), so both stacks are configured from
one place."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stacktools.stack.certs import TlsFiles


@dataclass(frozen=True)
class Site:
    """The paths a server's configuration names, and whether it listens on 127.0.0.1 of this
    host (the launcher) or on every interface of a compose container, where its peers are
    reached by their service names."""

    #: Where the server reads its configuration files.
    conf_dir: Path
    data_dir: Path
    #: The server's key and certificates; None when it speaks no TLS.
    tls: TlsFiles | None
    in_compose: bool = False


#: Every file of a rendered configuration, by its path under the site's ``conf_dir``.
ConfigFiles = dict[str, bytes]


def properties_file(properties: dict[str, str]) -> bytes:
    """A Java properties file of ``properties`` (keys and values plain: no escapes needed)."""
    return "".join(f"{key}={value}\n" for key, value in properties.items()).encode()
