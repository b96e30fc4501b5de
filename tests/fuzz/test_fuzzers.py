"""Every parser of untrusted bytes, fuzzed coverage-guided (atheris) for FUZZ_SECONDS (8) per
target, from the corpus in tests/fuzz/corpus; and the corpus plus every crash ever found
(tests/fuzz/crashes/<target>/, kept as regression inputs) replayed through each target.

The fuzzers run as a pool, FUZZ_JOBS at once (by default the machine's cores, shared among the
pytest-xdist workers), started in the order their tests run and only for the selected tests
(``-k rows`` fuzzes ``rows`` alone); each ``test_fuzzing_finds_nothing[target]`` waits for its
own target's fuzzer and passes or fails on it alone. A crash found here is copied into
tests/fuzz/crashes/<target>/ of the working tree: fix the code, and commit the input with the
fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

pytestmark = pytest.mark.fuzz
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SECONDS = int(os.environ.get("FUZZ_SECONDS", "8"))
#: The machine's cores, shared with the other pytest-xdist workers (scripts/test.sh runs two).
JOBS = max(
    1,
    int(
        os.environ.get("FUZZ_JOBS")
        or (os.cpu_count() or 1) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    ),
)
#: How long past FUZZ_SECONDS a fuzzer may run before it counts as hung.
GRACE_SECONDS = 300
DICTIONARIES = {
    "rows": "rows.dict",
    "source_file": "rows.dict",
    "source_file_gzip": "rows.dict",
    "names": "names.dict",
}


def saved_inputs(target: str) -> list[Path]:
    return sorted(
        p
        for folder in ("corpus", "crashes")
        for p in (HERE / folder / target).glob("*")
        if p.is_file()
    )


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_saved_inputs_pass(target: str) -> None:
    inputs = saved_inputs(target)
    assert inputs, f"no corpus for {target}"
    for path in inputs:
        TARGETS[target](path.read_bytes())


@dataclass
class FuzzRun:
    """One target's fuzzer, writing its output to files so that nothing blocks on a pipe while
    its test is not yet the one waiting."""

    target: str
    folder: Path
    process: subprocess.Popen[bytes]
    started: float
    returncode: int | None = None
    timed_out: bool = False

    @property
    def artifacts(self) -> Path:
        return self.folder / "artifacts"

    def stderr(self) -> str:
        return (self.folder / "stderr.log").read_text(errors="replace")

    def stdout(self) -> str:
        """Where atheris prints a target's uncaught exception and its traceback."""
        return (self.folder / "stdout.log").read_text(errors="replace")


def start_fuzzer(target: str, folder: Path) -> FuzzRun:
    """``python -m tests.fuzz TARGET`` with a fresh corpus folder beside the committed one."""
    corpus, artifacts = folder / "corpus", folder / "artifacts"
    corpus.mkdir()
    artifacts.mkdir()
    options = [
        f"-max_total_time={SECONDS}",
        f"-artifact_prefix={artifacts}/",
        "-rss_limit_mb=2048",
        "-max_len=65536",
        "-print_final_stats=1",
    ]
    if target in DICTIONARIES:
        options.append(f"-dict={HERE / DICTIONARIES[target]}")
    with (folder / "stdout.log").open("wb") as stdout, (folder / "stderr.log").open("wb") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.fuzz",
                target,
                *options,
                str(corpus),
                str(HERE / "corpus" / target),
            ],
            cwd=REPO,
            stdout=stdout,
            stderr=stderr,
        )
    return FuzzRun(target, folder, process, time.monotonic())


class FuzzPool:
    """Runs the selected targets' fuzzers, at most ``jobs`` at once, in the order their tests
    run, so that while one test waits for its fuzzer the next ones are already fuzzing."""

    def __init__(self, targets: list[str], jobs: int, folder: Callable[[str], Path]) -> None:
        self.pending = list(targets)
        self.jobs = jobs
        self.folder = folder
        self.runs: dict[str, FuzzRun] = {}

    def running(self) -> list[FuzzRun]:
        return [run for run in self.runs.values() if run.returncode is None]

    def reap(self) -> None:
        """Note the fuzzers that ended; kill one that hangs past its time."""
        for run in self.running():
            if run.process.poll() is None and (
                time.monotonic() - run.started > SECONDS + GRACE_SECONDS
            ):
                run.process.kill()
                run.process.wait()
                run.timed_out = True
            run.returncode = run.process.poll()

    def fill(self, wanted: str) -> None:
        """Start fuzzers while a core is free, the one a test waits for first."""
        while self.pending and len(self.running()) < self.jobs:
            target = wanted if wanted in self.pending else self.pending[0]
            self.pending.remove(target)
            self.runs[target] = start_fuzzer(target, self.folder(target))

    def result(self, target: str) -> FuzzRun:
        """The target's fuzzer once it has ended, started first when a core frees if it waits."""
        if target not in self.runs and target not in self.pending:
            self.pending.insert(0, target)
        while True:
            self.reap()
            run = self.runs.get(target)
            if run is not None and run.returncode is not None:
                self.fill(target)
                return run
            self.fill(target)
            time.sleep(0.05)

    def close(self) -> None:
        """Kill what is still running (a session stopped early, ``-x``), leaving no fuzzer."""
        self.pending.clear()
        for run in self.running():
            run.process.kill()
            run.returncode = run.process.wait()


@pytest.fixture(scope="module")
def fuzz_pool(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FuzzPool]:
    pytest.importorskip("atheris")
    # An xdist worker is given its tests one by one out of all it collected: it fuzzes a
    # target when its test asks, never ahead (the other worker may have that test).
    selected = [
        str(item.callspec.params["target"])
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.module is request.module
        and item.originalname == "test_fuzzing_finds_nothing"
        and "PYTEST_XDIST_WORKER" not in os.environ
    ]
    pool = FuzzPool(
        list(dict.fromkeys(selected)), JOBS, lambda target: tmp_path_factory.mktemp(target)
    )
    try:
        yield pool
    finally:
        pool.close()


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzzing_finds_nothing(target: str, fuzz_pool: FuzzPool) -> None:
    run = fuzz_pool.result(target)
    stderr = run.stderr()
    if run.timed_out:
        pytest.fail(f"{target}: the fuzzer ran past {SECONDS + GRACE_SECONDS} s:\n{stderr[-3000:]}")
    crashes = sorted(run.artifacts.iterdir())
    if crashes or run.returncode != 0:
        keep = HERE / "crashes" / target
        keep.mkdir(parents=True, exist_ok=True)
        for crash in crashes:
            shutil.copy(crash, keep / crash.name)
        pytest.fail(
            f"{target}: the fuzzer found a crash (kept in {keep}):\n{stderr[-3000:]}"
            f"{run.stdout()[-3000:]}"
        )
    runs = [
        line for line in stderr.splitlines() if line.startswith("stat::number_of_executed_units")
    ]
    print(
        f"{target}: {runs[0].split(':')[-1].strip() if runs else '?'} inputs in {SECONDS} s, "
        "nothing found"
    )
