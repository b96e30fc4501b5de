"""The value comparison that every end-to-end test ends with: each kind of wrong is named as
itself, and a float computed two ways is equal to rounding only where it must be."""

from __future__ import annotations

import pytest

from tests.support.verdict import Table, assert_exact, compare


def test_missing_extra_duplicated_and_different_are_told_apart() -> None:
    want: Table = {
        1: [{"a": 1.0}],
        2: [{"a": 2.0}],
        3: [{"a": 3.0}],
        5: [{"a": 5.0}],
        6: [{"a": 6.0}, {"a": 6.0}],
    }
    got: Table = {
        1: [{"a": 1.0}, {"a": 1.0}],
        2: [{"a": 2.5}],
        3: [{"a": 3.0}, {"a": 9.0}],
        4: [{"a": 4.0}],
        6: [{"a": 6.0}],
    }
    verdict = compare("t", want, got)
    assert verdict.missing == [5, (6, 1)] and verdict.extra == [4]
    assert sorted(verdict.duplicated) == [(1, 2, 1), (3, 2, 1)]
    assert sorted(verdict.different, key=str) == [(2, {"a": (2.0, 2.5)}), (3, {"a": (3.0, 9.0)})]
    assert not verdict.exact
    with pytest.raises(AssertionError, match="t: 2 missing .*1 extra .*2 duplicated .*2 different"):
        assert_exact(verdict)


def test_a_field_on_one_side_only_is_a_difference() -> None:
    assert compare("t", {1: [{"a": 1, "b": None}]}, {1: [{"a": 1}]}).different == [
        (1, {"b": (None, None)})
    ]


def test_means_are_equal_to_rounding_everything_else_exactly() -> None:
    assert compare(
        "t", {1: [{"mean": 0.1 + 0.2, "count": 3}]}, {1: [{"mean": 0.3, "count": 3}]}
    ).exact
    assert not compare("t", {1: [{"value": 0.1 + 0.2}]}, {1: [{"value": 0.3}]}).exact
    assert not compare("t", {1: [{"mean": 0.3}]}, {1: [{"mean": 0.3001}]}).exact


def test_identical_copies_count_once_where_re_sends_are_allowed() -> None:
    want: Table = {1: [{"v": 1.0}]}
    assert compare("raw", want, {1: [{"v": 1.0}, {"v": 1.0}]}, copies_allowed=True).exact
    changed = compare("raw", want, {1: [{"v": 1.0}, {"v": 2.0}]}, copies_allowed=True)
    assert changed.duplicated == [(1, 2, 1)] and changed.different == [(1, {"v": (1.0, 2.0)})]
