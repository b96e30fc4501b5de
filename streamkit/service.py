"""The start of every long-running service, in one place: parse settings (CLI + env), JSON
logs, SIGTERM handling and /metrics, then hand over to the service's own loop. A configuration
error stops it here with exit 2 (:func:`streamkit.cli.exit_code`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TypeVar

from streamkit.cli import HelpFormatter, entry_point, exit_code, program_name
from streamkit.config import ServiceSettings
from streamkit.errors import ConfigError
from streamkit.logs import setup_logging
from streamkit.metrics import serve_metrics
from streamkit.shutdown import ShutdownFlag

S = TypeVar("S", bound=ServiceSettings)


__all__ = ["HelpFormatter", "entry_point", "program_name", "run_service"]


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
    (``python -m <service>``). A :class:`ConfigError` while the settings load or in ``check``
    is exit 2 here; the caller's ``main`` is an :func:`entry_point` for the errors of its loop.

    ``check`` validates settings that depend on each other (or on the filesystem) before
    anything starts; a ``ValueError`` it raises becomes a usage error (exit 2), as argparse's
    own."""
    parser = argparse.ArgumentParser(
        prog=program_name(module or service), description=doc, formatter_class=HelpFormatter
    )
    try:
        settings, _ = settings_type.parse(argv, parser=parser)
        if check is not None:
            check(settings)
    except ConfigError as error:
        return exit_code(error, parser.prog)
    except ValueError as exc:  # the check's: what one field alone cannot say
        parser.error(str(exc))
    setup_logging(settings.log_level, service=service, fmt=settings.log_format)
    settings.log_legacy()
    shutdown = ShutdownFlag().install()
    serve_metrics(service, settings)
    return loop(settings, shutdown)
