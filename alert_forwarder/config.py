"""The forwarder's settings: Kafka (its own user, the overloads topic), Alertmanager, and how
often and for how long it holds a firing alert up."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from streamkit.config import AlertmanagerSettings, KafkaSettings
from streamkit.fields import login_as, serves_metrics_on, setting


@dataclass(frozen=True)
class ForwarderSettings(KafkaSettings, AlertmanagerSettings):
    kafka_username: str = login_as("kafka", "alerts")
    metrics_port: int = serves_metrics_on(9207)
    resend: timedelta = setting(
        timedelta(seconds=30),
        "ALERTS_RESEND",
        "how often each firing alert is posted to Alertmanager again (it resolves an alert "
        "that is not posted again before its end)",
    )
    hold: timedelta = setting(
        timedelta(hours=1),
        "ALERTS_HOLD",
        "the end a firing alert is posted with, from now: how long Alertmanager keeps it "
        "firing should this service stop",
    )
    max_components: int = setting(
        100_000,
        "ALERTS_MAX_COMPONENTS",
        "components whose latest alert is held; beyond it the oldest resolved ones are "
        "forgotten first (a bound on memory whatever the input)",
    )
