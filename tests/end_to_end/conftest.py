"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from stacktools.stack import Stack
from stacktools.stack.settings import Settings
from tests.support.webhook import Webhook


@pytest.fixture
def webhook(stack_settings: Settings) -> Iterator[Webhook]:
    """The launcher's Alertmanager restarted to send to a webhook of this test; afterwards
    restarted as it was."""
    hook = Webhook()
    hooked = dataclasses.replace(stack_settings, alert_webhook_url=hook.url)
    Stack(hooked, ["alertmanager"], allow_external=False).down()
    Stack(hooked, ["alertmanager"], allow_external=False).up()
    try:
        yield hook
    finally:
        Stack(stack_settings, ["alertmanager"], allow_external=False).down()
        Stack(stack_settings, ["alertmanager"], allow_external=False).up()
        hook.close()
