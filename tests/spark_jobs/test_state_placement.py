"""Where the single pass keeps its state (SPARK_STATE): explicit, or auto: an existing checkpoint
with Spark's state store goes on with it, otherwise the state is where the sink writes from."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_jobs import single_pass
from spark_jobs.config import SinglePassSettings


def placed(tmp_path: Path, **environ: str) -> bool:
    settings = SinglePassSettings.from_sources(
        environ={"SPARK_CHECKPOINT_DIR": str(tmp_path / "checkpoint"), **environ}
    )
    return settings.state_in_driver(single_pass.QUERY)


def test_auto_follows_the_sink_and_an_existing_checkpoint(tmp_path: Path) -> None:
    assert placed(tmp_path)  # the driver-side sink by default
    assert not placed(tmp_path, SPARK_SINK="executors")
    (tmp_path / "checkpoint" / "state").mkdir(parents=True)  # Spark's state store is there
    assert not placed(tmp_path)
    assert placed(tmp_path, SPARK_STATE="driver")  # explicit wins (and is then refused below)


def test_the_driver_state_with_the_executors_sink_is_refused(tmp_path: Path) -> None:
    settings = SinglePassSettings.from_sources(
        environ={"SPARK_STATE": "driver", "SPARK_SINK": "executors"}
    )
    with pytest.raises(ValueError, match="SPARK_SINK=driver"):
        single_pass.check(settings)
    assert not placed(tmp_path, SPARK_STATE="executors")
