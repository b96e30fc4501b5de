"""The dashboard checker's and the pipeline graph's errors, under the project's root
(:class:`streamkit.errors.StackError`)."""

from __future__ import annotations

from streamkit.errors import ConfigError, StackError


class PrometheusError(StackError, RuntimeError):
    """Prometheus could not be reached or refused a query."""


class QueryError(StackError):
    """A datasource refused a query or could not be reached; the message is shown per target."""


class VariableError(ConfigError):
    """A ``--var name=value`` that is not one: a usage error naming the option."""

    def __init__(self, pair: str) -> None:
        super().__init__("--var", f"expects name=value, not {pair!r}")
