"""Structured logging: one JSON object per line by default, so logs can be grepped and shipped
as is; ``LOG_FORMAT=text`` writes the same records as plain lines for a person at a terminal.

The Kafka client (librdkafka) logs through here too (:class:`KafkaClientLog`), so a service's
log holds one kind of line, not the library's own ``%3|...|FAIL|...`` format beside ours.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

_RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}

#: The environment variable that picks the format, and the formats it may name.
LOG_FORMAT_ENV = "LOG_FORMAT"
LOG_FORMATS = ("json", "text")


def _timestamp(record: logging.LogRecord) -> str:
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        + f".{int(record.msecs):03d}Z"
    )


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra={...}`` fields of a record."""
    return {k: v for k, v in vars(record).items() if k not in _RESERVED}


class JsonFormatter(logging.Formatter):
    """Keeps ``extra={...}`` fields as top-level keys instead of losing them in the message."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(_fields(record))
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger>: <message> key=value ...``: the JSON line's content, for
    reading rather than parsing (values with spaces are quoted)."""

    def format(self, record: logging.LogRecord) -> str:
        pairs = " ".join(f"{k}={_text_value(v)}" for k, v in _fields(record).items())
        line = (
            f"{_timestamp(record)} {record.levelname:<7} {record.name}: {record.getMessage()}"
            + (f"  {pairs}" if pairs else "")
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text_value(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return json.dumps(text) if not text or any(c.isspace() or c in '"=' for c in text) else text


def log_format(environ: dict[str, str] | None = None) -> str:
    """``json`` (the default: what services write for machines) or ``text``, from LOG_FORMAT;
    ValueError naming the variable for anything else."""
    value = (os.environ if environ is None else environ).get(LOG_FORMAT_ENV, "json")
    value = value.strip().lower() or "json"
    if value not in LOG_FORMATS:
        raise ValueError(f"{LOG_FORMAT_ENV}={value!r}: one of {', '.join(LOG_FORMATS)}")
    return value


def formatter(fmt: str | None = None) -> logging.Formatter:
    """The formatter of ``fmt`` (default: :func:`log_format`)."""
    return TextFormatter() if (fmt or log_format()) == "text" else JsonFormatter()


def setup_logging(
    level: str = "INFO", *, service: str | None = None, fmt: str | None = None
) -> logging.Logger:
    """Configure the root logger once for a service process and return the service's logger.
    ``fmt``: ``json`` or ``text`` (default: the LOG_FORMAT environment variable, else json)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    return logging.getLogger(service or "streamkit")


class KafkaClientLog:
    """What confluent-kafka's ``logger`` setting takes: librdkafka calls ``log(level, "%s [%s]
    %s", facility, client, text)``; this logs ``text`` on the ``kafka`` logger with the facility
    (e.g. ``FAIL``) and the client's name as fields. The client hands its lines over while it
    is polled (poll, consume, flush), from the polling thread."""

    def __init__(self, name: str = "kafka") -> None:
        self.logger = logging.getLogger(name)

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        if len(args) == 3 and msg == "%s [%s] %s":
            facility, client, text = args
            self.logger.log(level, "%s", str(text), extra={"facility": facility, "client": client})
        else:  # another shape from a newer client: kept as it comes
            self.logger.log(level, msg, *args)
