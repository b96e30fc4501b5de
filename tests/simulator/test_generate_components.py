"""The generator's machines with several drives: what the operation statistics need to show
(every band, overloads against the duty rating, braking, parked drives), while one drive per
machine still writes exactly the rows it always did."""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter, defaultdict

from lsb.results import mechanical_power
from operators import Records
from operators.keyed import KeyedStates
from opstats import OperationStatistics, Pattern, PowerInputs, StatsConfig, load_catalogue
from simulator.generate import generate
from streamkit.identifiers import is_quantity
from streamkit.paths import REPO_ROOT


def test_one_component_writes_the_rows_it_always_did() -> None:
    rows = json.dumps(list(generate(3000, 4, seed=7))).encode()
    assert (
        hashlib.sha256(rows).hexdigest()
        == "893197bd1fb5d0153a8a6068bdb23a8732dd413841d69520d4f1e5646d95c5c1"
    )


def test_several_components_are_deterministic_and_physical() -> None:
    rows = list(generate(4000, 2, seed=3, components=3))
    assert rows == list(generate(4000, 2, seed=3, components=3))
    names = {name for row in rows for name in row} - {"Thing", "Timestamp", "id"}
    assert all(map(is_quantity, names))
    assert {f"{q}_{c}" for q in ("actSpeed", "vaTorque") for c in ("C11", "C12", "C13")} <= names
    checked = 0
    for row in rows:
        for c in ("C12", "C13"):
            if {f"actSpeed_{c}", f"vaTorque_{c}", f"vaPower_{c}"} <= row.keys():
                want = 2 * math.pi / 60 * row[f"actSpeed_{c}"] * row[f"vaTorque_{c}"]
                assert math.isclose(row[f"vaPower_{c}"], want, rel_tol=1e-3, abs_tol=0.5)
                checked += 1
    assert checked > 500


def test_the_statistics_of_a_generated_file_show_every_band_overloads_and_braking() -> None:
    """Against the ratings of the example catalogue the generator is made for."""
    catalogue = load_catalogue(REPO_ROOT / "examples" / "machine-catalogue.yaml")
    inputs = PowerInputs(Pattern("actSpeed_*"), Pattern("vaTorque_*"), mechanical_power)
    table = KeyedStates(OperationStatistics(StatsConfig(inputs, catalogue)))
    per_thing: dict[str, list] = defaultdict(list)
    for row in generate(30_000, 3, seed=1, components=3):
        for name, value in row.items():
            if name not in ("Thing", "Timestamp", "id"):
                per_thing[row["Thing"]].append((name, row["Timestamp"], value, row["id"]))
    step = table.step([(t, Records.of(*zip(*rs, strict=True))) for t, rs in per_thing.items()], 0)
    cycles = [c for _, _, out in step.emitted for c in out.cycles]
    for thing, state in table.states.items():
        cycles += table.operator.for_key(thing).finish(state)[1].cycles
    band_time: dict[str, Counter] = defaultdict(Counter)
    for c in cycles:
        assert not c.rating.defaulted
        for band, ms in zip(c.rating.band_names, c.band_ms, strict=True):
            band_time[c.component][band] += ms
    for component, spectrum in band_time.items():
        names = load_catalogue(REPO_ROOT / "examples" / "machine-catalogue.yaml").rating(
            "M0000", component
        )
        assert all(spectrum[band] > 0 for band in names.band_names), (component, spectrum)
    assert sorted(band_time) == ["C11", "C12", "C13"]
    for component in ("C11", "C12", "C13"):
        mine = [c for c in cycles if c.component == component]
        assert any(c.duty_exceeded for c in mine), component
        assert any(c.regenerative_kwh > 0 for c in mine), component
        assert any(c.no_data_ms == c.cycle_ms - c.data_ms > 0 for c in mine), component
