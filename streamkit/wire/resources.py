"""The contract's data files, shipped inside the package: the Avro schemas and the topic
declarations. Found with :mod:`importlib.resources`, so an installed package (``pip install .``,
the container image) reads them without the source tree or ``PYTHONPATH``."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

#: Every schema the services write or read (``<name>.avsc`` in the package's ``schemas/``).
SCHEMAS = ("measurement", "joined", "aggregate", "late", "opstats", "overload")


def schema_dir() -> Traversable:
    """The folder of the ``.avsc`` files (a peer tool may want the folder itself)."""
    return resources.files(__package__) / "schemas"


def schema_file(name: str) -> Traversable:
    """``schemas/<name>.avsc``; a name outside :data:`SCHEMAS` is a programming error."""
    if name not in SCHEMAS:
        raise ValueError(f"no schema {name!r} (known: {', '.join(SCHEMAS)})")
    return schema_dir() / f"{name}.avsc"


def topics_file() -> Traversable:
    """``topics.yaml``: every Kafka topic of the stack, with its settings and role."""
    return resources.files(__package__) / "topics.yaml"
