"""python -m stacktools.stack.disk_space: the free space of the stack's data directories on
/metrics, and its servers' logs kept within a size.

Kafka and InfluxDB stop taking writes when their disk fills, and neither tells Prometheus how
full it is; this small process does, for the directories it is given (the stack launcher runs
it for its own data directories). Each value is read when /metrics is scraped, so none is stale.
The launcher's servers write their logs for as long as they run; with ``--log-dir`` this process
rotates every log there that grew past its size (:mod:`stacktools.stack.log_rotation`). With
``--disk-resume`` it starts again the servers a full disk stopped, once it has room
(:mod:`stacktools.stack.resume`).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import sys
import time
from pathlib import Path

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily

from stacktools.stack.log_rotation import rotate_logs
from stacktools.stack.resume import Resumer
from streamkit.config import ServiceSettings
from streamkit.fields import setting
from streamkit.health import beat
from streamkit.service import entry_point, run_service
from streamkit.shutdown import ShutdownFlag
from streamkit.sizes import ByteSize

log = logging.getLogger("stacktools.stack.disk_space")

#: Seconds between two rounds of its loop (a heartbeat, the logs' rotation).
ROUND_S = 5.0


@dataclasses.dataclass(frozen=True)
class DiskSpaceSettings(ServiceSettings):
    """Which directories to report, by name."""

    disk_watch: str = setting(
        "",
        "DISK_WATCH",
        "the directories to report, NAME=PATH[,NAME=PATH...]: the free space of the filesystem "
        "holding each, labelled dir=NAME",
    )
    log_dir: str = setting(
        "",
        "LOG_DIR",
        "a directory of server logs (*.log) to keep within LOG_MAX_SIZE each; empty: none",
    )
    log_max_size: ByteSize = setting(
        ByteSize(64 << 20),
        "LOG_MAX_SIZE",
        "size past which a log of LOG_DIR is rotated (copied to NAME.log.1, then truncated)",
    )
    log_keep: int = setting(3, "LOG_KEEP", "rotated copies kept of each log (NAME.log.1 ...)")
    disk_resume: str = setting(
        "",
        "DISK_RESUME",
        "servers of DISK_WATCH, comma separated, that the launcher starts again once their disk "
        "has room after it filled: a Kafka node stopped by it (its log says so), InfluxDB "
        "while this process saw its disk full (restarted); empty: none",
    )


def watched(text: str) -> dict[str, Path]:
    """``kafka=/a,influxdb=/b`` as {name: path}; a ValueError names what is wrong."""
    dirs: dict[str, Path] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, path = item.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise ValueError(f"DISK_WATCH: {item!r} is not NAME=PATH")
        dirs[name.strip()] = Path(path.strip())
    if not dirs:
        raise ValueError("DISK_WATCH: no directory to report (NAME=PATH[,NAME=PATH...])")
    return dirs


class DiskSpace:
    """A prometheus_client collector: ``data_dir_free_bytes{dir}`` and
    ``data_dir_filesystem_bytes{dir}``; a directory that does not exist (yet) has no sample."""

    def __init__(self, dirs: dict[str, Path]) -> None:
        self.dirs = dirs

    def collect(self) -> list[GaugeMetricFamily]:
        free = GaugeMetricFamily(
            "data_dir_free_bytes",
            "bytes an unprivileged writer can still use on the filesystem of a data directory",
            labels=["dir"],
        )
        size = GaugeMetricFamily(
            "data_dir_filesystem_bytes",
            "size of the filesystem that holds a data directory",
            labels=["dir"],
        )
        for name, path in self.dirs.items():
            try:
                usage = shutil.disk_usage(path)
            except OSError:
                continue
            free.add_metric([name], usage.free)
            size.add_metric([name], usage.total)
        return [free, size]


def resumed(settings: DiskSpaceSettings) -> dict[str, Path]:
    """DISK_RESUME's servers with their data directories; a ValueError names what is wrong."""
    dirs = watched(settings.disk_watch)
    names = [name.strip() for name in settings.disk_resume.split(",") if name.strip()]
    unknown = [name for name in names if name not in dirs]
    if unknown:
        raise ValueError(f"DISK_RESUME: {unknown} not in DISK_WATCH ({', '.join(dirs)})")
    return {name: dirs[name] for name in names}


def check(settings: DiskSpaceSettings) -> None:
    resumed(settings)
    if settings.log_keep < 1:
        raise ValueError(f"LOG_KEEP: at least one rotated copy, not {settings.log_keep}")


def serve(settings: DiskSpaceSettings, shutdown: ShutdownFlag) -> int:
    dirs = watched(settings.disk_watch)
    REGISTRY.register(DiskSpace(dirs))
    resumer = Resumer(resumed(settings), settings.run_dir)
    log.info(
        "reporting disk space",
        extra={"dirs": {k: str(v) for k, v in dirs.items()}, "resume": list(resumer.servers)},
    )
    while not shutdown.wait(ROUND_S):
        if settings.log_dir:
            rotate_logs(Path(settings.log_dir), settings.log_max_size, settings.log_keep)
        try:
            resumer.round(time.monotonic())
        except Exception:  # the next round tries again; the reporter must go on reporting
            log.exception("the resume round failed")
        beat()
    resumer.stop()
    return 0


@entry_point("stacktools.stack.disk_space")
def main(argv: list[str] | None = None) -> int:
    return run_service(
        "disk_space",
        DiskSpaceSettings,
        __doc__,
        argv,
        serve,
        check=check,
        module="stacktools.stack.disk_space",
    )


if __name__ == "__main__":
    sys.exit(main())
