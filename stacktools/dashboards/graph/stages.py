"""What each stage of the graph is asked in PromQL. Services are found by the ``service`` label
that the local stack's and compose's Prometheus put on every target; a Spark stage is shown
when Prometheus scrapes it, so the view fits whichever shape runs (one pass, or join and
aggregate side by side)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stacktools.harness.services import SERVICES, spark_stages

#: The window rates are taken over: long enough to span several scrapes (5 s apart).
RATE_WINDOW = "1m"
#: A Spark job's figure: seconds its sink's transaction has been open, absent between batches.
OPEN_TRANSACTION = "open transaction"


@dataclass(frozen=True)
class Stage:
    """A service node: ``rate`` is what it does per second, ``unit`` what it counts;
    ``extras`` are further figures (label -> PromQL), ``dead_letters`` a counter expression."""

    service: str
    unit: str
    rate: str
    dead_letters: str
    extras: dict[str, str] = field(default_factory=dict)


def _sum(metric: str, service: str) -> str:
    """A running service's labelled counters appear at their first increment: none is 0."""
    return f'sum({metric}{{service="{service}"}}) or vector(0)'


def _rate(metric: str, service: str) -> str:
    return f'sum(rate({metric}{{service="{service}"}}[{RATE_WINDOW}])) or vector(0)'


SIMULATOR = Stage(
    "simulator",
    "rows",
    _rate("simulator_rows_published_total", "simulator"),
    _sum("simulator_rows_rejected_total", "simulator"),
)
BRIDGE = Stage(
    "mqtt_bridge",
    "records",
    _rate("bridge_records_total", "mqtt_bridge"),
    _sum("bridge_dlq_total", "mqtt_bridge"),
    {
        "MQTT unacked": _sum("bridge_unacked_messages", "mqtt_bridge"),
        "producer queue": _sum("bridge_producer_queue_length", "mqtt_bridge"),
    },
)
CONNECTOR = Stage(
    "db_connector",
    "points",
    _rate("connector_points_written_total", "db_connector"),
    _sum("connector_dead_letters_total", "db_connector"),
    {
        "lag": _sum("connector_consumer_lag_records", "db_connector"),
        "pending": _sum("connector_pending_points", "db_connector"),
        "write retries": _sum("connector_write_retries_total", "db_connector"),
    },
)


def spark_stage(service: str) -> Stage:
    """A Spark job: its input rate, its last batch, the last batch its transactional sink
    committed (empty batches commit nothing) and how long its open transaction has been open
    (none between batches)."""
    open_since = f'eos_transaction_open_since_seconds{{service="{service}"}}'
    return Stage(
        service,
        "rows",
        _rate("spark_input_rows_total", service),
        _sum("eos_dead_letters_total", service),
        {
            "batch": f'max(spark_last_batch_id{{service="{service}"}})',
            "committed": f'max(eos_last_committed_batch{{service="{service}"}})',
            OPEN_TRANSACTION: f"max(time() - {open_since} and {open_since} > 0)",
        },
    )


#: Every service's health: up (the scrape answered) and when its work loop last went round.
UP = 'max by (service) (up{service!=""})'
#: The Spark jobs of the running shape: those up at some time in the last hour (Prometheus
#: scrapes every job's port, whether that job is part of the shape or not).
SPARK_RAN = 'max by (service) (max_over_time(up{service=~"spark_.+"}[1h])) > 0'
PROGRESS_AGE = "time() - max by (service) (service_last_progress_timestamp_seconds)"


#: Every Spark job a shape may run (services.SHAPES): each reads the raw topic and writes the
#: output topics, so they all sit on one level of the graph.
SPARK_JOBS: tuple[str, ...] = spark_stages(tuple(SERVICES))
#: Where the pipeline ends: not a service Prometheus scrapes, the connector reports on it.
SINK = "influxdb"
#: The graph's levels in flow order, by id: the terminal view and the Grafana panel both draw
#: these (the terminal only the Spark jobs of the running shape).
LEVELS: tuple[tuple[str, ...], ...] = (
    (SIMULATOR.service,),
    (BRIDGE.service,),
    SPARK_JOBS,
    (CONNECTOR.service,),
    (SINK,),
)
#: What carries the data from one level to the next.
HOPS = ("MQTT", "Kafka: the raw topic", "Kafka: the output topics", "InfluxDB")


def node_ids() -> list[str]:
    """Every node of the graph in flow order."""
    return [node for level in LEVELS for node in level]


def edges() -> list[tuple[str, str, str]]:
    """(source, target, hop) of every edge: each node of a level feeds each of the next."""
    return [
        (source, target, hop)
        for upper, lower, hop in zip(LEVELS[:-1], LEVELS[1:], HOPS, strict=True)
        for source in upper
        for target in lower
    ]
