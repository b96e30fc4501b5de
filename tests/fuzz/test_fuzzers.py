"""Every parser of untrusted bytes, fuzzed coverage-guided (atheris) for FUZZ_SECONDS (8) per
target, from the corpus in tests/fuzz/corpus; and the corpus plus every crash ever found
(tests/fuzz/crashes/<target>/, kept as regression inputs) replayed through each target.

A crash found here is copied into tests/fuzz/crashes/<target>/ of the working tree: fix the
code, and commit the input with the fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz.targets import TARGETS

pytestmark = pytest.mark.fuzz
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SECONDS = int(os.environ.get("FUZZ_SECONDS", "8"))
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


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzzing_finds_nothing(target: str, tmp_path: Path) -> None:
    pytest.importorskip("atheris")
    corpus, artifacts = tmp_path / "corpus", tmp_path / "artifacts"
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
    run = subprocess.run(
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
        capture_output=True,
        text=True,
        timeout=SECONDS + 300,
    )
    crashes = sorted(artifacts.iterdir())
    if crashes or run.returncode != 0:
        keep = HERE / "crashes" / target
        keep.mkdir(parents=True, exist_ok=True)
        for crash in crashes:
            shutil.copy(crash, keep / crash.name)
        pytest.fail(f"{target}: the fuzzer found a crash (kept in {keep}):\n{run.stderr[-3000:]}")
    runs = [
        line
        for line in run.stderr.splitlines()
        if line.startswith("stat::number_of_executed_units")
    ]
    print(
        f"{target}: {runs[0].split(':')[-1].strip() if runs else '?'} inputs in {SECONDS} s, "
        "nothing found"
    )
