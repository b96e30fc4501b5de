"""Log formats and the Kafka client's lines: JSON for machines, text for people, librdkafka's
own lines turned into records of ours (with a real client, no broker needed)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from streamkit.config import KafkaSettings
from streamkit.kafka_clients import client_config
from streamkit.logs import (
    JsonFormatter,
    KafkaClientLog,
    TextFormatter,
    log_format,
    setup_logging,
)


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def _record(**extra: object) -> logging.LogRecord:
    return logging.makeLogRecord(
        {"name": "svc", "levelname": "WARNING", "levelno": 30, "msg": "batch %d", "args": (7,)}
        | extra
    )


def test_the_format_comes_from_log_format_json_by_default() -> None:
    assert log_format({}) == "json"
    assert log_format({"LOG_FORMAT": " Text "}) == "text"
    assert log_format({"LOG_FORMAT": ""}) == "json"
    with pytest.raises(ValueError, match="LOG_FORMAT='xml'"):
        log_format({"LOG_FORMAT": "xml"})


def test_a_text_line_holds_what_the_json_line_holds() -> None:
    record = _record(rows=42, topic="machinedata raw", empty="")
    entry = json.loads(JsonFormatter().format(record))
    line = TextFormatter().format(record)
    assert line.startswith(entry["ts"] + " WARNING svc: batch 7  ")
    assert line.endswith('rows=42 topic="machinedata raw" empty=""')


def test_a_text_line_carries_the_traceback() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        record = _record(exc_info=sys.exc_info())
    lines = TextFormatter().format(record).splitlines()
    assert lines[0].endswith("svc: batch 7") and lines[-1] == "RuntimeError: boom"


@pytest.mark.usefixtures("restore_root")
@pytest.mark.parametrize("fmt", ["json", "text"])
def test_setup_logging_uses_the_environments_format(
    fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOG_FORMAT", fmt)
    setup_logging("INFO", service="svc")
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler.formatter, TextFormatter if fmt == "text" else JsonFormatter)


def test_librdkafka_lines_become_records_with_facility_and_client() -> None:
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    logger = logging.getLogger("kafka-test")
    logger.addHandler(Keep())
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    KafkaClientLog("kafka-test").log(40, "%s [%s] %s", "FAIL", "bridge#producer-1", "refused")
    KafkaClientLog("kafka-test").log(20, "plain %s", "line")
    assert [(r.levelno, r.getMessage()) for r in seen] == [(40, "refused"), (20, "plain line")]
    # the two fields KafkaClientLog adds to the record
    assert (vars(seen[0])["facility"], vars(seen[0])["client"]) == ("FAIL", "bridge#producer-1")


@pytest.mark.usefixtures("restore_root")
def test_a_real_clients_lines_reach_our_json_log(capfd: pytest.CaptureFixture[str]) -> None:
    """A producer pointed at a closed port: librdkafka's connect failure arrives on poll as one
    JSON line of ours on stderr, and nothing in librdkafka's own format."""
    stream = io.StringIO()
    setup_logging("INFO", service="svc", fmt="json")
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    settings = KafkaSettings(kafka_bootstrap_servers="127.0.0.1:1")
    config = client_config(settings, "log-test")
    config["security.protocol"] = "PLAINTEXT"
    producer = Producer(config)
    for _ in range(20):
        producer.poll(0.2)
        if stream.getvalue():
            break
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines, "librdkafka said nothing about a refused connection"
    assert {line["logger"] for line in lines} == {"kafka"}
    assert lines[0]["client"].startswith("log-test#producer") and lines[0]["facility"]
    assert "|FAIL|" not in capfd.readouterr().err
