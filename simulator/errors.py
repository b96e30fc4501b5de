"""The simulator's errors, under the project's root (:class:`streamkit.errors.StackError`)."""

from __future__ import annotations

from pathlib import Path

from streamkit.errors import EXIT_USAGE, MqttConnectError, StackError


class EventsFileError(StackError):
    """The file cannot be replayed at all. Not a ValueError, so that no caller mistakes it for
    one bad row or a usage error: ``str()`` is the one line to show. Exit 2: the file given
    is the user's to fix."""

    exit_code = EXIT_USAGE

    def __init__(self, path: Path, cause: str) -> None:
        super().__init__(f"{path}: {cause}")
        self.path, self.cause = path, cause


class MachineUserMissing(MqttConnectError):
    """MQTT_MACHINE_IDENTITIES: a Thing whose machine user has no password yet (made by
    ``python -m stacktools.stack machine-user``)."""
