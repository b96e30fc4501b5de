"""The start of every long-running service, in one place: parse settings (CLI + env), JSON
logs, SIGTERM handling and /metrics, then hand over to the service's own loop."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TypeVar

from streamkit.config import ServiceSettings
from streamkit.logs import setup_logging
from streamkit.metrics import serve_metrics
from streamkit.shutdown import ShutdownFlag

S = TypeVar("S", bound=ServiceSettings)


def run_service(
    service: str,
    settings_type: type[S],
    doc: str | None,
    argv: Sequence[str] | None,
    loop: Callable[[S, ShutdownFlag], int],
    *,
    check: Callable[[S], None] | None = None,
    module: str | None = None,
) -> int:
    """``service`` is the metrics/log name and, unless ``module`` names another, the module
    (``python -m <service>``).

    ``check`` validates settings that depend on each other (or on the filesystem) before
    anything starts; a ``ValueError`` it raises becomes a usage error (exit 2), as argparse's own."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {module or service}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    settings, _ = settings_type.parse(argv, parser=parser)
    if check is not None:
        try:
            check(settings)
        except ValueError as exc:
            parser.error(str(exc))
    setup_logging(settings.log_level, service=service)
    shutdown = ShutdownFlag().install()
    serve_metrics(service, settings)
    return loop(settings, shutdown)
