"""The speed x torque join as a Quix Streams 3.x app, the peer side of benchmarks/bench_peers.py.

Run by the peer's own venv (benchmarks/support/peer_venv.py), never by the project's, and imports
nothing of the project: what it must agree on with our job (the raw key format, the Avro
schemas, mechanical power) comes in as files and is restated here.

What it does, as close to our join job as Quix expresses it:
- reads the raw topic exactly-once (``processing_guarantee="exactly-once"``: read_committed,
  output and offsets in one transaction per checkpoint);
- a key deserializer turns the raw key ``thing|quantity|event_ms`` into the Thing, so Quix's
  state is per Thing without ``group_by`` (which would write every record once more to an
  internal repartition topic): the raw topic is already partitioned by Thing;
- Quix's Avro deserializer decodes every value (our job decodes every value too, then filters);
- Quix cannot self-join one topic (``join_asof`` wants two topics), so the join is a stateful
  step holding the latest record of each of the two quantities per Thing: every record of one
  quantity is paired with the latest record of the other (an as-of join in both directions,
  in arrival order); a record not newer than its own stream's latest is late and dropped, as
  our join's strict policy would set it aside;
- the pair with its mechanical power goes, Avro-encoded with our joined schema, to the output
  topic (in the same transaction as the input offsets and the state's changelog).

It stops by itself: once it has consumed the number of records it was told the input holds, it
asks the app to stop, which commits the last checkpoint. It prints JSON lines: the wall time
of the first consumed record, then a summary (end time after the last commit, counts).

The Kafka password comes from the environment (QUIX_KAFKA_PASSWORD), never the command line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from quixstreams import Application
from quixstreams.kafka.configuration import ConnectionConfig
from quixstreams.models.serializers import Deserializer, SerializationContext
from quixstreams.models.serializers.avro import AvroDeserializer, AvroSerializer
from quixstreams.state import State

RPM_TO_RAD_PER_S = 2 * math.pi / 60


class ThingKey(Deserializer):
    """Raw key ``<thing>|<quantity>|<event ms>`` -> the Thing (split from the right: a Thing
    may contain ``|``, quantities and times never do)."""

    def __call__(self, value: bytes, ctx: SerializationContext) -> str:
        return value.rsplit(b"|", 2)[0].decode()


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


class Counter:
    """Counts every consumed record, keeps the two joined quantities, and asks the app to stop
    once the whole input went through (the record that completes the count is still processed
    to the end of the pipeline: ``Application.stop`` only ends the poll loop)."""

    def __init__(self, app: Application, expected: int, quantities: tuple[str, str]) -> None:
        self.app, self.expected, self.quantities = app, expected, quantities
        self.consumed = 0

    def __call__(self, value: dict[str, Any]) -> bool:
        self.consumed += 1
        if self.consumed == 1:
            emit({"event": "first_record", "time": time.time()})
        if self.consumed == self.expected:
            self.app.stop()
        return value["quantity"] in self.quantities


class LatestPartnerJoin:
    """Per Thing (the state's prefix is the message key, our Thing), the latest (time, value) of
    each quantity; a record is paired with the other quantity's latest."""

    def __init__(self, left: str, right: str, result_name: str) -> None:
        self.left, self.right, self.result_name = left, right, result_name
        self.other = {left: right, right: left}
        self.pairs = self.late = 0

    def __call__(self, value: dict[str, Any], state: State) -> list[dict[str, Any]]:
        quantity, time_ms, number = value["quantity"], value["event_time_ms"], value["value"]
        own = state.get(quantity)
        if own is not None and time_ms <= own[0]:
            self.late += 1
            return []
        state.set(quantity, (time_ms, number))
        partner = state.get(self.other[quantity])
        if partner is None:
            return []
        (left_t, left_v), (right_t, right_v) = (
            ((time_ms, number), partner) if quantity == self.left else (partner, (time_ms, number))
        )
        thing = value["thing"]
        self.pairs += 1
        return [
            {
                "id": f"{thing}|{left_t}|{right_t}",
                "thing": thing,
                "left_quantity": self.left,
                "right_quantity": self.right,
                "left_time_ms": left_t,
                "right_time_ms": right_t,
                "left_value": left_v,
                "right_value": right_v,
                "result_name": self.result_name,
                "result": RPM_TO_RAD_PER_S * left_v * right_v,
                "event_time_ms": max(left_t, right_t),
            }
        ]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--username", required=True)
    parser.add_argument("--security-protocol", default="SASL_PLAINTEXT")
    parser.add_argument("--sasl-mechanism", default="SCRAM-SHA-512")
    parser.add_argument(
        "--ssl-ca-location", help="CA file the broker's certificate is verified against (TLS)"
    )
    parser.add_argument("--input-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--consumer-group", required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument(
        "--schema-dir", type=Path, required=True, help="where measurement.avsc and joined.avsc are"
    )
    parser.add_argument(
        "--pair", default="actSpeed_C11:vaTorque_C11:mechanical_power", help="left:right:result"
    )
    parser.add_argument(
        "--expected-records", type=int, required=True, help="stop once this many were consumed"
    )
    parser.add_argument(
        "--idle-timeout-s",
        type=float,
        default=120.0,
        help="also stop after this long without a record (then the summary shows the shortfall)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    left, right, result_name = args.pair.split(":")
    if result_name != "mechanical_power":
        raise SystemExit("only mechanical_power is restated here")
    sasl = args.security_protocol.upper().startswith("SASL")
    connection = ConnectionConfig(
        bootstrap_servers=args.bootstrap,
        security_protocol=args.security_protocol.lower(),
        **(
            {
                "sasl_mechanism": args.sasl_mechanism,
                "sasl_username": args.username,
                "sasl_password": os.environ["QUIX_KAFKA_PASSWORD"],
            }
            if sasl
            else {}
        ),
        **(
            {
                "ssl_ca_location": args.ssl_ca_location,
                "ssl_endpoint_identification_algorithm": "https",
            }
            if args.ssl_ca_location
            else {}
        ),
    )
    app = Application(
        broker_address=connection,
        consumer_group=args.consumer_group,
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once",
        state_dir=args.state_dir,
        loglevel="WARNING",
    )
    schema = {
        name: json.loads((args.schema_dir / f"{name}.avsc").read_text())
        for name in ("measurement", "joined")
    }
    raw = app.topic(
        args.input_topic,
        key_deserializer=ThingKey(),
        value_deserializer=AvroDeserializer(schema["measurement"]),
    )
    out = app.topic(
        args.output_topic,
        key_serializer="string",
        value_serializer=AvroSerializer(schema["joined"]),
    )
    counter = Counter(app, args.expected_records, (left, right))
    join = LatestPartnerJoin(left, right, result_name)
    sdf = app.dataframe(raw)
    sdf = sdf.filter(counter).apply(join, stateful=True, expand=True)
    sdf.to_topic(out)
    app.run(timeout=args.idle_timeout_s, collect=False)
    emit(
        {
            "event": "done",
            "time": time.time(),
            "consumed": counter.consumed,
            "pairs": join.pairs,
            "late": join.late,
        }
    )
    return 0 if counter.consumed == args.expected_records else 1


if __name__ == "__main__":
    sys.exit(main())
