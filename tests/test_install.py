"""`pip install .` outside a checkout: the installed code finds no checkout and keeps its files
in the user's directories (never in site-packages), reads `.env` from the working directory,
and its tools run from the resources packaged with them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamkit.paths import REPO_ROOT

SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"
#: What a build needs none of: pip builds in the tree it is given, so it gets a copy without them
#: (and leaves no build/ in the checkout).
NOT_BUILT = shutil.ignore_patterns(
    ".*", "run", "data", "demo-output*", "tests", "build", "*.egg-info", "__pycache__"
)


@dataclass(frozen=True)
class Installed:
    site: Path  #: where pip put the packages
    home: Path  #: the user's home for the installed programs
    work: Path  #: their working directory: no checkout anywhere above it

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(self.home),
            "PYTHONPATH": str(self.site),  # ahead of the venv's link to the checkout
        }
        return subprocess.run(
            [sys.executable, *args],
            cwd=self.work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("installed")
    source, site, home, work = root / "source", root / "site", root / "home", root / "work"
    shutil.copytree(REPO_ROOT, source, symlinks=True, ignore=NOT_BUILT)
    home.mkdir()
    work.mkdir()
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site)]
        + [str(source)],
        check=True,
        timeout=600,
    )
    return Installed(site, home, work)


def test_the_installed_code_keeps_its_files_in_the_user_s_directories(
    installed: Installed,
) -> None:
    probe = (
        "import json, streamkit.paths as p, stacktools.resources as r\n"
        "print(json.dumps({'code': str(p.CODE_ROOT), 'checkout': p.CHECKOUT and str(p.CHECKOUT),"
        " 'run': str(p.default_run_dir()), 'dotenv': str(p.dotenv_path()),"
        " 'tools': str(p.STACK_DIR), 'resources': [str(x) for x in (r.ALERT_RULES,"
        " r.DATASOURCES_FILE, r.EXAMPLE_CATALOGUE, *sorted(r.DASHBOARD_DIR.glob('*.json')))]}))"
    )
    done = installed.run("-c", probe)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert Path(found["code"]) == installed.site and found["checkout"] is None
    assert Path(found["run"]) == installed.home / ".local/state/machinedata-stack/run"
    assert Path(found["tools"]) == installed.home / ".local/share/machinedata-stack"
    assert Path(found["dotenv"]) == installed.work / ".env"
    dashboards = sorted((REPO_ROOT / "grafana" / "dashboards").glob("*.json"))
    assert len(found["resources"]) == 3 + len(dashboards)
    for path in map(Path, found["resources"]):
        assert path.is_relative_to(installed.site) and path.is_file() and not path.is_symlink()


def test_a_service_reads_dotenv_from_its_working_directory(installed: Installed) -> None:
    (installed.work / ".env").write_text("KAFKA_PORT=19999\nCONNECTOR_BATCH_POINTS=777\n")
    probe = (
        "from db_connector.config import ConnectorSettings\n"
        "s = ConnectorSettings.from_sources()\n"
        "print(s.kafka_port, s.batch_points, s.run_dir)"
    )
    done = installed.run("-c", probe)
    (installed.work / ".env").unlink()
    assert done.returncode == 0, done.stderr
    port, batch, run_dir = done.stdout.split()
    assert (port, batch) == ("19999", "777")
    assert Path(run_dir) == installed.home / ".local/state/machinedata-stack/run"
    assert not (installed.site / "run").exists()


def test_the_installed_tools_run_from_their_packaged_resources(installed: Installed) -> None:
    checked = installed.run("-m", "stacktools.dashboards", "validate")
    dashboards = len(list((REPO_ROOT / "grafana" / "dashboards").glob("*.json")))
    assert checked.returncode == 0, checked.stderr
    assert f"{dashboards} dashboards, 0 problems" in checked.stdout
    options = ["--input", str(SAMPLE), "--left", "actSpeed_C11", "--right", "vaTorque_C11"]
    joined = installed.run("-m", "lsb", *options, "--output", "pairs.jsonl")
    assert joined.returncode == 0, joined.stderr
    here = subprocess.run(
        [sys.executable, "-m", "lsb", *options],  # the checkout's, to stdout
        capture_output=True,
        check=True,
        timeout=300,
    )
    assert (installed.work / "pairs.jsonl").read_bytes() == here.stdout
    assert here.stdout.count(b"\n") > 1000
