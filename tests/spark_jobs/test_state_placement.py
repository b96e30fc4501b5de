"""Where the single pass keeps its state (SPARK_STATE): explicit, or auto: decided by the
deployment's settings (where its sink writes from), never by what a checkpoint holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs import single_pass
from spark_jobs.config import SinglePassSettings


def placed(tmp_path: Path, **environ: str) -> str:
    settings = SinglePassSettings.from_sources(
        environ={"SPARK_CHECKPOINT_DIR": str(tmp_path / "checkpoint"), **environ}
    )
    return settings.placed_state()


def test_auto_follows_the_deployment_and_never_the_checkpoint(tmp_path: Path) -> None:
    assert placed(tmp_path) == "driver"  # the driver-side sink by default
    assert placed(tmp_path, SPARK_SINK="executors") == "executors"
    assert placed(tmp_path, SPARK_MASTER="spark://127.0.0.1:7077") == "driver"  # compose
    (tmp_path / "checkpoint" / "state").mkdir(parents=True)  # Spark's state store is there
    assert placed(tmp_path) == "driver"  # the same settings place it alike
    assert placed(tmp_path, SPARK_STATE="executors") == "executors"  # explicit wins
    assert placed(tmp_path, SPARK_STATE="driver", SPARK_SINK="executors") == "driver"


def test_the_driver_state_with_the_executors_sink_is_refused(tmp_path: Path) -> None:
    settings = SinglePassSettings.from_sources(
        environ={"SPARK_STATE": "driver", "SPARK_SINK": "executors"}
    )
    with pytest.raises(ValueError, match="SPARK_SINK=driver"):
        single_pass.check(settings)
