"""The demo's last word: verify (stacktools.verify) on the run's database against the replayed
file. A --live replay re-stamps every row with the wall clock, so the file no longer states the
event times: there the check is skipped, and says why."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from mqtt_bridge.config import BridgeSettings
from spark_jobs.config import SinglePassSettings
from stacktools.stack.settings import Settings
from stacktools.verify.check import verify
from stacktools.verify.report import render
from stacktools.verify.rules import UnsupportedRules, rules_of
from streamkit.durations import duration_ms

SKIPPED_LIVE = "skipped: --live stamps every row with the wall clock, not the file's time"


def stage_settings(env: dict[str, str]) -> SinglePassSettings:
    """The stages' options as they run: the demo's environment and what it adds for them."""
    return SinglePassSettings.from_sources(environ={**os.environ, **env})


def statistics_run(job: SinglePassSettings) -> bool:
    """Whether the operation statistics run (beside the join, in either shape)."""
    return bool(job.opstats_power.strip())


def demo_verdict(
    settings: Settings,
    events: Path,
    database: str,
    order: str,
    live: bool,
    *,
    env: dict[str, str] | None = None,
) -> dict:
    """``{"exact": bool, "text": ..., **details}``, or ``{"skipped": why}`` (not a failure).
    ``env``: what the demo added to the stages' environment."""
    if live:
        return {"skipped": SKIPPED_LIVE}
    job = stage_settings(env or {})
    try:  # the stages inherit the demo's environment: these are the options they run with
        rules = rules_of(job)
    except UnsupportedRules as exc:
        return {"skipped": str(exc)}
    if not statistics_run(job):
        rules = dataclasses.replace(rules, stats=None)
    max_future = duration_ms(BridgeSettings.from_sources().max_future)
    outcome = verify(settings, events, database, rules, order=order, max_future_ms=max_future)
    return {**outcome.as_dict(), "text": render(outcome)}
