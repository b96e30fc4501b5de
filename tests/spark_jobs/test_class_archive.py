"""The driver JVM's class archive: written once, published only whole, then used by every job."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from spark_jobs import class_archive


def fake_jvm(dump: Path | None) -> subprocess.Popen:
    """A process that, like the JVM, exits when its stdin closes and writes its dump then."""
    code = "import sys\nsys.stdin.read()\n" + (
        f"open({str(dump)!r}, 'wb').write(b'classes' * 1000)\n" if dump else ""
    )
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)


def test_the_first_job_dumps_and_publishes_and_the_next_uses_it(tmp_path: Path) -> None:
    first = class_archive.prepare(tmp_path)
    assert first.dump is not None and not first.use
    assert (
        first.java_options() == f"-XX:ArchiveClassesAtExit={first.dump} {class_archive.QUIET_CDS}"
    )
    class_archive.finish(first, fake_jvm(first.dump))
    assert first.archive.read_bytes() == b"classes" * 1000 and not first.dump.exists()
    second = class_archive.prepare(tmp_path)
    assert second.use and second.dump is None and second.archive == first.archive
    assert second.java_options().startswith(f"-XX:SharedArchiveFile={first.archive} ")


def test_a_dump_that_is_being_written_or_was_abandoned_is_never_used(tmp_path: Path) -> None:
    first = class_archive.prepare(tmp_path)
    assert first.dump is not None
    first.dump.write_bytes(b"half")  # its JVM is writing it (or was killed): no rename happened
    meanwhile = class_archive.prepare(tmp_path)
    assert not meanwhile.use and meanwhile.dump is None and meanwhile.java_options() == ""
    old = time.time() - class_archive.ABANDONED_S - 1
    os.utime(first.dump, (old, old))
    later = class_archive.prepare(tmp_path)
    assert not first.dump.exists() and later.dump is not None and not later.archive.exists()


def test_a_jvm_that_left_no_dump_publishes_nothing(tmp_path: Path) -> None:
    plan = class_archive.prepare(tmp_path)
    class_archive.finish(plan, fake_jvm(None))
    assert not plan.archive.exists()
    assert class_archive.prepare(tmp_path).dump is not None  # the next job tries again


def test_a_directory_that_cannot_be_made_means_a_start_without_an_archive(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    plan = class_archive.prepare(blocked / "jvm-classes")
    assert not plan.use and plan.dump is None and plan.java_options() == ""
