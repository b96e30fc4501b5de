"""Loaded by every Python process started with this folder on PYTHONPATH: installs the client
faults of ``tests.faults`` when ``CLIENT_FAULTS`` is set (tests only; see that module)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
from tests.faults import install_from_environment  # noqa: E402

install_from_environment()
