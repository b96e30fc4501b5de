"""The simulator's errors, under the project's root (:class:`streamkit.errors.StackError`)."""

from __future__ import annotations

from streamkit.errors import MqttConnectError


class MachineUserMissing(MqttConnectError):
    """MQTT_MACHINE_IDENTITIES: a Thing whose machine user has no password yet (made by
    ``python -m stacktools.stack machine-user``)."""
