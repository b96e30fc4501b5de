"""The machine catalogue: both formats, the defaults, the first matching entry, and every mistake
named by file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from opstats import CatalogueError, Rating, load_catalogue
from streamkit.errors import EXIT_USAGE
from streamkit.paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"


@pytest.mark.parametrize("name", ["machine-catalogue.yaml", "machine-catalogue.csv"])
def test_the_shipped_examples_load_and_say_the_same(name: str) -> None:
    catalogue = load_catalogue(EXAMPLES / name)
    spindle = catalogue.rating("R0815", "C11")
    assert (spindle.rated_power_kw, spindle.duty_rating_pct, spindle.defaulted) == (20, 60, False)
    assert catalogue.rating("M007", "C11").rated_power_kw == 15
    axis = catalogue.rating("M007", "C13")
    assert (axis.rated_power_kw, axis.bands_pct) == (4, (0, 25, 50, 75, 100))
    assert axis.band_names == ("0-25", "25-50", "50-75", "75-100", "over-100")
    other = catalogue.rating("H31415", "C11")
    assert other.defaulted and other == Rating()
    assert len(catalogue.content_hash) == 16


def test_the_two_examples_hold_the_same_ratings() -> None:
    yaml_ = load_catalogue(EXAMPLES / "machine-catalogue.yaml")
    csv_ = load_catalogue(EXAMPLES / "machine-catalogue.csv")
    assert [(e.thing, e.component, e.rating) for e in yaml_.entries] == [
        (e.thing, e.component, e.rating) for e in csv_.entries
    ]


def test_no_file_is_the_original_dashboards_rating() -> None:
    rating = load_catalogue(None).rating("any", "C11")
    assert rating.defaulted
    assert (rating.rated_power_w, rating.duty_rating_pct, rating.bound_w) == (20_000, 40, 200_000)
    assert rating.edges_w == (0, 4000, 8000, 12000, 16000, 20000)
    assert rating.band_names == ("0-20", "20-40", "40-60", "60-80", "80-100", "over-100")


def test_the_first_matching_entry_wins_and_defaults_fill_what_it_leaves_out(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "defaults:\n  duty_rating_pct: 25\n  physical_bound: 4\n"
        "machines:\n"
        "  - {thing: 'A*', component: 'C1?', rated_power_kw: 3}\n"
        "  - {thing: '*', component: '*', rated_power_kw: 7, duty_rating_pct: 80}\n"
    )
    catalogue = load_catalogue(path)
    assert catalogue.rating("A1", "C12") == Rating(3, duty_rating_pct=25, physical_bound=4)
    assert catalogue.rating("B1", "C12") == Rating(7, duty_rating_pct=80, physical_bound=4)
    assert not catalogue.rating("B1", "C12").defaulted


def test_a_rating_id_names_what_the_rating_decides() -> None:
    assert Rating().rating_id == Rating(defaulted=True).rating_id
    assert Rating(20).rating_id != Rating(21).rating_id
    assert Rating(duty_rating_pct=41).rating_id != Rating().rating_id
    assert Rating(bands_pct=(0, 50, 100)).rating_id != Rating().rating_id


BAD_YAML = [
    ("machines:\n  - thing: A\n    component: C1\n    rated_power_kw: -2\n", 4, "rated_power_kw"),
    ("machines:\n  - thing: A\n    component: C1\n", 2, "rated_power_kw"),
    ("machines:\n  - thing: A\n    component: C1\n    rated_power_kw:\n", 4, "rated_power_kw"),
    ("machines:\n  - thing: A\n    component: C1\n    rated_power_kw: 2\n    duty: 3\n", 5, "duty"),
    ("machines:\n  - component: C1\n    rated_power_kw: 2\n", 2, "thing"),
    (
        "machines:\n  - {thing: A, component: C1, rated_power_kw: 2, bands_pct: [0, 50, 40, 100]}",
        2,
        "bands_pct",
    ),
    (
        "machines:\n  - {thing: A, component: C1, rated_power_kw: 2, bands_pct: [10, 100]}\n",
        2,
        "bands_pct",
    ),
    (
        "machines:\n  - {thing: A, component: C1, rated_power_kw: 2, duty_rating_pct: 0}\n",
        2,
        "duty_rating_pct",
    ),
    (
        "machines:\n  - {thing: A, component: C1, rated_power_kw: 2, physical_bound: 1}\n",
        2,
        "physical_bound",
    ),
    ("machines:\n  - {thing: A, component: C1, rated_power_kw: yes}\n", 2, "rated_power_kw"),
    ("machines:\n  - {thing: A, component: C1, rated_power_kw: .nan}\n", 2, "rated_power_kw"),
    ("defaults:\n  rated_power_kw: 0\n", 2, "rated_power_kw"),
    ("defaults:\n  thing: A\n", 2, "thing"),
    ("machine:\n  - {}\n", 1, "machine"),
    ("machines: 3\n", 1, "machines"),
    ("machines:\n  - [1, 2]\n", 2, "machines"),
    ("machines:\n  - {thing: A, thing: B, component: C, rated_power_kw: 1}\n", 2, "thing"),
    ("machines:\n  - {thing: A\n", 3, "file"),
    ("- a\n", 1, "file"),
]


@pytest.mark.parametrize(("text", "line", "field"), BAD_YAML)
def test_a_bad_yaml_catalogue_names_its_file_line_and_field(
    tmp_path: Path, text: str, line: int, field: str
) -> None:
    path = tmp_path / "machines.yaml"
    path.write_text(text)
    with pytest.raises(CatalogueError) as caught:
        load_catalogue(path)
    error = caught.value
    assert (error.line, error.field) == (line, field), str(error)
    assert str(error).startswith(f"machine catalogue {path}:{line}: {field}: ")
    assert error.exit_code == EXIT_USAGE


BAD_CSV = [
    ("thing,component,rated_power_kw\nA,C1,-1\n", 2, "rated_power_kw"),
    ("thing,component,rated_power_kw\nA,C1,\n", 2, "rated_power_kw"),
    ("thing,component\nA,C1\n", 2, "rated_power_kw"),
    ("thing,component,rated_kw\nA,C1,3\n", 1, "rated_kw"),
    ("# note\nthing,component,rated_power_kw\n\n,C1,3\n", 4, "thing"),
    ("thing,component,rated_power_kw\nA,C1,3,4\n", 2, "row"),
    ("thing,component,rated_power_kw,bands_pct\nA,C1,3,0 x 100\n", 2, "bands_pct"),
]


@pytest.mark.parametrize(("text", "line", "field"), BAD_CSV)
def test_a_bad_csv_catalogue_names_its_file_line_and_field(
    tmp_path: Path, text: str, line: int, field: str
) -> None:
    path = tmp_path / "machines.csv"
    path.write_text(text)
    with pytest.raises(CatalogueError) as caught:
        load_catalogue(path)
    assert (caught.value.line, caught.value.field) == (line, field), str(caught.value)


def test_a_missing_or_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(CatalogueError, match="nothing.yaml: file: No such file"):
        load_catalogue(tmp_path / "nothing.yaml")
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(CatalogueError, match="not UTF-8"):
        load_catalogue(binary)


def test_an_empty_file_is_the_defaults(tmp_path: Path) -> None:
    for name in ("e.yaml", "e.csv"):
        (tmp_path / name).write_text("")
        assert load_catalogue(tmp_path / name).rating("x", "C1") == Rating()
