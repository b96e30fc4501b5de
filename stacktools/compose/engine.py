"""python -m stacktools.compose.engine start|stop|status|env

A Docker-compatible container engine on machines without Docker: podman's API service on a unix
socket (``docker compose``, the docker CLI and testcontainers talk to it through DOCKER_HOST),
plus a healthcheck ticker. Podman schedules healthchecks with systemd timers; where there is no
systemd nothing runs them, every container stays "starting" and ``depends_on: service_healthy``
waits forever. The ticker runs each container's healthcheck at its own interval (every 2 s while
it is still starting) through the same API. Podman's settings for such machines come from
docker/podman/containers.conf (CONTAINERS_CONF); no system file is edited.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from streamkit.cli import HelpFormatter, entry_point, program_name
from streamkit.deadline import TimedOut, wait_until
from streamkit.paths import CACHE_DIR, REPO_ROOT

SOCKET = Path(os.environ.get("CONTAINER_SOCKET", "/run/podman/podman.sock"))
STATE_DIR = CACHE_DIR / "engine"
CONTAINERS_CONF = REPO_ROOT / "docker" / "podman" / "containers.conf"
#: podman's own API (healthchecks) answers only under a versioned prefix.
LIBPOD = "/v4.0.0/libpod"
#: While a container is still "starting", its check runs this often, so that `up` is gated promptly.
STARTING_INTERVAL_S = 2.0


def engine_env() -> dict[str, str]:
    """What a client (docker compose, docker, testcontainers) needs to use this engine."""
    return {
        "DOCKER_HOST": f"unix://{SOCKET}",
        "DOCKER_BUILDKIT": "0",
        "COMPOSE_BAKE": "false",
        "TESTCONTAINERS_RYUK_DISABLED": "true",
        "CONTAINERS_CONF": str(CONTAINERS_CONF),
    }


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout_s: float) -> None:
        super().__init__("localhost", timeout=timeout_s)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.path))


def api(method: str, path: str, timeout_s: float = 10.0) -> tuple[int, bytes]:
    """One request to the engine's API: (status, body). OSError when nothing listens."""
    connection = _UnixConnection(SOCKET, timeout_s)
    try:
        connection.request(method, path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def answers() -> bool:
    try:
        return api("GET", "/_ping", timeout_s=2)[0] == 200
    except OSError:
        return False


# ------------------------------------------------------------------------------------ processes
def _pid_file(name: str) -> Path:
    return STATE_DIR / f"{name}.pid"


def _alive(name: str) -> int | None:
    try:
        pid = int(_pid_file(name).read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _spawn(name: str, command: list[str], cwd: Path) -> None:
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with (STATE_DIR / f"{name}.log").open("ab") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **engine_env()},
            start_new_session=True,
            cwd=cwd,
        )
    _pid_file(name).write_text(str(process.pid))


def _stale() -> bool:
    """Whether the running service was started from a checkout that is gone (a removed clone,
    or one cloned anew in its place): its podman settings are missing, or its working directory
    is, and then it fails every build or start ("write child: broken pipe"). A live other
    checkout's is left alone."""
    pid = _alive("podman")
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if pid else []
        if pid and os.readlink(f"/proc/{pid}/cwd").endswith(" (deleted)"):
            return True
    except OSError:
        return False
    for item in environ:
        if item.startswith(b"CONTAINERS_CONF="):
            return not Path(item.split(b"=", 1)[1].decode(errors="replace")).is_file()
    return False


def start(timeout_s: float = 30.0) -> None:
    """Idempotent: the API service and the ticker run afterwards (restarted when they were
    started from a checkout that is gone)."""
    if _stale():
        stop()
        wait_until(lambda: not answers(), timeout_s, f"the stale podman service on {SOCKET}")
    if not answers():
        SOCKET.parent.mkdir(parents=True, exist_ok=True)
        SOCKET.unlink(missing_ok=True)
        # outside any checkout: the service outlives the one that started it
        _spawn("podman", ["podman", "system", "service", "--time=0", f"unix://{SOCKET}"], Path("/"))
        try:
            wait_until(answers, timeout_s, f"podman's API on {SOCKET}", interval_s=0.2)
        except TimedOut:
            log = (STATE_DIR / "podman.log").read_text(errors="replace")[-2000:]
            raise TimedOut(
                f"podman's API did not answer on {SOCKET} within {timeout_s:.0f} s:\n{log}"
            ) from None
    if _alive("ticker") is None:
        _spawn("ticker", [sys.executable, "-m", "stacktools.compose.engine", "tick"], REPO_ROOT)


def stop() -> list[str]:
    stopped = []
    for name in ("ticker", "podman"):
        pid = _alive(name)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            stopped.append(name)
        _pid_file(name).unlink(missing_ok=True)
    return stopped


# ------------------------------------------------------------------------------------ ticker
@dataclass
class Ticker:
    """Runs due healthchecks; ``due`` maps a container id to the time its next check is due."""

    due: dict[str, float] = field(default_factory=dict)
    intervals: dict[str, float | None] = field(default_factory=dict)

    def _interval(self, container_id: str) -> float | None:
        if container_id not in self.intervals:
            status, body = api("GET", f"{LIBPOD}/containers/{container_id}/json")
            check = (
                (json.loads(body).get("Config") or {}).get("Healthcheck") if status == 200 else None
            )
            test = (check or {}).get("Test") or []
            nanoseconds = (check or {}).get("Interval") or 30_000_000_000
            self.intervals[container_id] = nanoseconds / 1e9 if test and test[0] != "NONE" else None
        return self.intervals[container_id]

    def tick(self, now: float) -> int:
        """One round: run every due check; the number run."""
        status, body = api("GET", f"{LIBPOD}/containers/json")
        if status != 200:
            raise OSError(f"listing the containers answered {status}: {body[:200]!r}")
        running = {c["Id"] for c in json.loads(body) or []}
        for gone in set(self.due) - running:
            self.due.pop(gone, None)
            self.intervals.pop(gone, None)
        ran = 0
        for container_id in running:
            interval = self._interval(container_id)
            if interval is None or self.due.get(container_id, 0.0) > now:
                continue
            status, body = api(
                "GET", f"{LIBPOD}/containers/{container_id}/healthcheck", timeout_s=120
            )
            ran += 1
            healthy = status == 200 and json.loads(body).get("Status") == "healthy"
            self.due[container_id] = now + (
                interval if healthy else min(interval, STARTING_INTERVAL_S)
            )
        return ran


def tick_forever() -> None:
    ticker = Ticker()
    stopping = False

    def on_term(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    while not stopping:
        try:
            ticker.tick(time.monotonic())
        except Exception as exc:  # noqa: BLE001 - the engine restarting must not end the ticker
            print(f"[ticker] {type(exc).__name__}: {exc}", flush=True)
        time.sleep(0.5)


@entry_point("stacktools.compose.engine")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=program_name("stacktools.compose.engine"),
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("action", choices=["start", "stop", "status", "env", "tick"])
    args = parser.parse_args(argv)
    if args.action == "start":
        start()
        print(f"[engine] podman's API answers on {SOCKET}; healthcheck ticker running")
    elif args.action == "stop":
        print(f"[engine] stopped: {', '.join(stop()) or 'nothing was running'}")
    elif args.action == "status":
        print(
            f"api: {'answers' if answers() else 'down'} ({SOCKET}); ticker: "
            f"{'running' if _alive('ticker') else 'stopped'}"
        )
        return 0 if answers() else 1
    elif args.action == "env":
        print("".join(f"export {key}={value}\n" for key, value in engine_env().items()), end="")
    else:
        tick_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
