"""The start of every long-running service, in one place: parse settings (CLI + env), JSON
logs, SIGTERM handling and /metrics, then hand over to the service's own loop."""
from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TypeVar

from streamkit.config import Settings
from streamkit.logs import setup_logging
from streamkit.metrics import serve_metrics
from streamkit.shutdown import ShutdownFlag

S = TypeVar("S", bound=Settings)


def run_service(service: str, settings_type: type[S], doc: str | None, argv: Sequence[str] | None,
                loop: Callable[[S, ShutdownFlag], int]) -> int:
    """``service`` is the module name (``python -m <service>``) and the metrics/log name."""
    parser = argparse.ArgumentParser(prog=f"python -m {service}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    settings, _ = settings_type.parse(argv, parser=parser)
    setup_logging(settings.log_level, service=service)
    shutdown = ShutdownFlag().install()
    serve_metrics(service, settings)
    return loop(settings, shutdown)
