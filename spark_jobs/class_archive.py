"""A class archive (JDK class data sharing) for the driver JVM: a job starts ~3 s sooner.

Most of a job's start is the JVM loading and verifying Spark's classes. The first job on a
machine runs with ``-XX:ArchiveClassesAtExit``, so its JVM writes the classes it loaded to a
dump when it exits; later jobs map that archive (``-XX:SharedArchiveFile``) instead of loading
the classes one by one. The JVM writes the dump after the driver has stopped it and maps an
archive without checking that it is whole (a truncated one crashes the JVM with SIGBUS), so a
dump becomes the archive only by a rename after its JVM was seen to exit (:func:`finish`): a
killed job leaves a dump that is never used, and it is removed later. The archive is keyed by
the Java binary and the jars on the classpath, so an upgrade starts a new one; a stale archive
is refused by the JVM itself, with a warning.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("spark_jobs.class_archive")

#: The JVM's class-sharing log lines off (its unified logging prints warnings by default).
QUIET_CDS = "-Xlog:cds=off -Xlog:cds+dynamic=off"

#: A dump whose JVM never handed it over (killed, or still writing) is removed after this long.
ABANDONED_S = 600.0


@dataclass(frozen=True)
class ClassArchive:
    """The archive of one classpath; ``dump`` is set when this driver's JVM writes it at exit,
    ``use`` when the archive exists (neither: another job's JVM is writing it now)."""

    archive: Path
    use: bool = False
    dump: Path | None = None

    def java_options(self) -> str:
        """The JVM's CDS warnings are off either way: mapping an archive warns about a stale one
        (refused, so only slower), and writing one warns about every class it cannot hold
        (old bytecode, classes loaded by Spark's own class loaders): a thousand lines in the
        job's log that ask nothing of anyone."""
        if self.use:
            return f"-XX:SharedArchiveFile={self.archive} {QUIET_CDS}"
        return f"-XX:ArchiveClassesAtExit={self.dump} {QUIET_CDS}" if self.dump is not None else ""


def _classpath_key() -> str:
    """The Java binary and every jar of Spark's classpath (name and size)."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else Path(shutil.which("java") or "java")
    jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    text = "\n".join(
        [str(java.resolve()), pyspark.__version__, *(f"{j.name} {j.stat().st_size}" for j in jars)]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def prepare(directory: Path) -> ClassArchive:
    """Use the archive of this classpath if there is one, else have this JVM dump one (unless
    another job's JVM is dumping it right now). The archive only saves time: a directory that
    cannot be written (a read-only home in a container) means a start without it, never a
    failure."""
    key = _classpath_key()
    archive = directory / f"{key}.jsa"
    if archive.exists():
        return ClassArchive(archive, use=True)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return _dump_unless_being_written(directory, key, archive)
    except OSError as exc:
        log.warning(
            "no class archive: its directory is not usable",
            extra={"dir": str(directory), "error": str(exc)},
        )
        return ClassArchive(archive)


def _dump_unless_being_written(directory: Path, key: str, archive: Path) -> ClassArchive:
    for dump in directory.glob(f"{key}.*.dump"):
        try:
            if time.time() - dump.stat().st_mtime < ABANDONED_S:
                return ClassArchive(archive)  # being written by another job's JVM (or just killed)
            dump.unlink()
        except FileNotFoundError:
            continue
    return ClassArchive(archive, dump=directory / f"{key}.{os.getpid()}.dump")


def finish(plan: ClassArchive, jvm: subprocess.Popen | None, timeout_s: float = 120.0) -> None:
    """After ``spark.stop()``: when this JVM dumps the archive, end it (it exits when its stdin
    closes) and wait for it, then publish the dump by a rename."""
    if plan.dump is None or jvm is None:
        return
    try:
        if jvm.stdin is not None:
            jvm.stdin.close()
        jvm.wait(timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning(
            "the JVM did not exit: its class archive is not used", extra={"error": str(exc)}
        )
        return
    try:
        if plan.dump.stat().st_size > 0:
            os.replace(plan.dump, plan.archive)
            log.info(
                "class archive written",
                extra={
                    "archive": str(plan.archive),
                    "mb": round(plan.archive.stat().st_size / 2**20),
                },
            )
    except OSError as exc:  # no dump (e.g. the JVM could not write it): the next job tries again
        log.warning("class archive not written", extra={"dump": str(plan.dump), "error": str(exc)})
