"""Loaded by every Python process started with this folder on PYTHONPATH: installs the client
faults of ``tests.support.faults`` when ``CLIENT_FAULTS`` is set (tests only; see that module)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository root
from tests.support.faults import install_from_environment  # noqa: E402

install_from_environment()
