"""Where a whole-pipeline test runs: on the main stack in ``local[*]`` with one bridge, or
scaled out (the launcher's Spark cluster with the executors' sink, two sharded bridges, a
second stack of three Kafka nodes)."""

from __future__ import annotations

from dataclasses import dataclass, field

from stacktools.stack import Stack
from stacktools.stack.settings import Settings
from streamkit.wire import shard_prefix


@dataclass(frozen=True)
class Topology:
    name: str  #: "local" or "scaled-out"
    settings: Settings
    env: dict[str, str] = field(
        default_factory=dict
    )  #: every stage's environment on top of the settings'
    bridges: int = 1
    spark: Stack | None = None  #: the Spark cluster (its workers may be killed)

    @property
    def scaled_out(self) -> bool:
        return self.spark is not None

    def machine_prefix(self, prefix: str) -> str:
        """A topic prefix some bridge subscribes under (shard 0's), for messages a test
        publishes itself."""
        return shard_prefix(prefix, 0, self.bridges)
