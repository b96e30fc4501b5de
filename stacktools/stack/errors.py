"""The stack launcher's errors, under the project's root (:class:`streamkit.errors.StackError`,
which ``stacktools.stack`` re-exports so callers catch anything the launcher refused), and its
InfluxDB client's (:mod:`stacktools.stack.influx`)."""

from __future__ import annotations

from streamkit.errors import EXIT_USAGE, StackError, TimedOut


class LauncherError(StackError, RuntimeError):
    """A server could not be started or checked; the message says why and what to do. Exit 2,
    as the launcher always has: a port in use or a missing password is the user's to fix."""

    exit_code = EXIT_USAGE


class StackTimedOut(LauncherError, TimedOut):
    """A server did not get there in time: a launcher error, and a TimedOut like every other
    wait that ran out."""


class InfluxError(StackError, RuntimeError):
    """InfluxDB refused or failed a statement."""
