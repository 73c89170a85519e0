"""app.textfiles.each_once: the records of an upload, each id once (issue 27: the check the
Hexagons and STS formats shared)."""

from __future__ import annotations

import pytest

from app.errors import InputError
from app.textfiles import each_once


def test_records_come_back_in_file_order():
    assert each_once([(1, "a"), (3, "b")], str, "id", "{key!r} is on line {line}", "none") == ["a", "b"]


def test_a_repeat_is_refused_on_its_line_naming_the_first():
    with pytest.raises(InputError) as err:
        each_once([(1, "a"), (2, "b"), (5, "a")], str, "id", "the mission {key!r} is already on line {line}", "none")
    assert (err.value.line, err.value.field) == (5, "id")
    assert "the mission 'a' is already on line 1" in str(err.value)


def test_a_file_without_records_says_so():
    with pytest.raises(InputError) as err:
        each_once([], str, "id", "{key}", "the file holds no missions")
    assert err.value.field == "file" and "the file holds no missions" in str(err.value)
