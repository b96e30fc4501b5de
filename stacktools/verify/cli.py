"""python -m stacktools.verify: does the run's output hold exactly what the events file implies?

Recomputes from the file, by an implementation of the specification independent of the
pipeline's, every raw point, joined pair, window, late record and operation statistic (cycle
and band) the run must have written,
and compares them value by value with the run's InfluxDB database, or with --topics its Kafka
output topics: per measurement and per Thing, what is missing, extra, duplicated (one record on
several points; on a transactional topic, a second committed copy) or different. Exit 0 when
exact, 1 on any difference, 2 on a usage error or an unreadable file, database or topic.

The stages' options (JOIN_PAIRS, JOIN_MAX_GAP, AGGREGATE_TUMBLING, AGGREGATE_SLIDING,
AGGREGATE_SESSION_GAP, AGGREGATE_ALLOWED_LATENESS, OPSTATS_POWER, MACHINE_CATALOGUE,
OPSTATS_CYCLE, OPSTATS_MAX_HOLD, OPSTATS_PARTNER_TIMEOUT) are read like the Spark job reads them:
command line, environment, .env. --order must be the replay's (the simulator's --order).
A finished replay is checked whole, except windows the data has not closed (they may be absent;
present, they must be equal). With --live only what is certain so far must be there
(docs/verify.md); whatever is there must be right.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from mqtt_bridge.config import BridgeSettings
from spark_jobs.config import SinglePassSettings
from stacktools.stack.errors import InfluxError
from stacktools.verify.check import verify
from stacktools.verify.events import ORDERS
from stacktools.verify.kafka_source import TopicsError, TopicsReader
from stacktools.verify.report import render
from stacktools.verify.rules import UnsupportedRules, rules_of
from streamkit.config import InfluxSettings, KafkaSettings
from streamkit.durations import duration_ms, parse_duration_ms
from streamkit.errors import ConfigError
from streamkit.events_file import EventsFileError

#: The stage options verify takes on its command line too (else the environment's).
RULE_OPTIONS = (
    "pairs",
    "max_gap",
    "tumbling",
    "sliding",
    "session_gap",
    "allowed_lateness",
    "opstats_power",
    "machine_catalogue",
    "opstats_cycle",
    "opstats_max_hold",
    "opstats_partner_timeout",
    "opstats_overload_time",
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m stacktools.verify",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--events", type=Path, required=True, help="the events file that was replayed")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--database",
        help="the run's InfluxDB database (default: INFLUX_DATABASE; the demo prints its own)",
    )
    where.add_argument(
        "--topics",
        nargs="?",
        const="",
        metavar="RUN",
        help="read the run's Kafka topics instead of InfluxDB: RAW_TOPIC, JOINED_TOPIC, "
        "AGGREGATES_TOPIC, LATE_TOPIC and OPSTATS_TOPIC, each followed by .RUN when given (a "
        "demo run's copies, printed as *.RUN)",
    )
    p.add_argument(
        "--order",
        choices=ORDERS,
        default="event-time",
        help="the replay's order, as given to the simulator (default: event-time)",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="the run is still going: records newer than each Thing's newest raw point minus "
        "--live-margin may still be on their way and are not required",
    )
    p.add_argument(
        "--live-margin",
        default="60s",
        help="with --live: how far behind a Thing's newest raw point a record must be to be "
        "required (default: 60s)",
    )
    p.add_argument("--json", type=Path, help="also write the verdict as JSON to this file")
    rules = p.add_argument_group("the stages' options (default: as the Spark job reads them)")
    rules.add_argument(
        "--pairs",
        help="JOIN_PAIRS: left:right[:result], comma separated ('*': every component)",
    )
    rules.add_argument("--max-gap", help="JOIN_MAX_GAP")
    rules.add_argument("--tumbling", help="AGGREGATE_TUMBLING")
    rules.add_argument("--sliding", help="AGGREGATE_SLIDING")
    rules.add_argument("--session-gap", help="AGGREGATE_SESSION_GAP")
    rules.add_argument("--allowed-lateness", help="AGGREGATE_ALLOWED_LATENESS")
    rules.add_argument("--opstats-power", help="OPSTATS_POWER: LEFT:RIGHT[:result]; empty: none")
    rules.add_argument("--machine-catalogue", help="MACHINE_CATALOGUE")
    rules.add_argument("--opstats-cycle", help="OPSTATS_CYCLE")
    rules.add_argument("--opstats-max-hold", help="OPSTATS_MAX_HOLD")
    rules.add_argument("--opstats-partner-timeout", help="OPSTATS_PARTNER_TIMEOUT")
    rules.add_argument("--opstats-overload-time", help="OPSTATS_OVERLOAD_TIME")
    return p


@dataclasses.dataclass(frozen=True)
class VerifySettings(KafkaSettings, InfluxSettings):
    """What verify reads: the output in InfluxDB, or in Kafka's topics (``--topics``)."""


def main(argv: list[str] | None = None) -> int:
    settings, args = VerifySettings.parse(argv, parser=parser())
    try:
        job = SinglePassSettings.from_sources(
            cli={name: getattr(args, name) for name in RULE_OPTIONS}
        )
        rules = rules_of(job)
        margin = parse_duration_ms(args.live_margin, allow_zero=True) if args.live else None
        max_future = duration_ms(BridgeSettings.from_sources().max_future)
    except (ConfigError, UnsupportedRules, ValueError) as exc:
        print(f"python -m stacktools.verify: {exc}", file=sys.stderr)
        return 2
    source = TopicsReader(settings, args.topics) if args.topics is not None else None
    try:
        outcome = verify(
            settings,
            args.events,
            args.database or settings.influx_database,
            rules,
            order=args.order,
            max_future_ms=max_future,
            live_margin_ms=margin,
            source=source,
        )
    except (EventsFileError, OSError) as exc:
        print(f"python -m stacktools.verify: cannot read {exc}", file=sys.stderr)
        return 2
    except (InfluxError, TopicsError) as exc:
        print(f"python -m stacktools.verify: {exc}", file=sys.stderr)
        return 2
    print(render(outcome), flush=True)
    if args.json:
        args.json.write_text(json.dumps(outcome.as_dict(), indent=2, default=str))
    return 0 if outcome.exact else 1
