"""What the worker's pages call a kind's items, one and many: the end page, the consent page
and the preview count them in these words."""

from __future__ import annotations

from typing import ClassVar

import pytest

from app.kinds import all_kinds
from app.kinds.tom import CommonToM

WORDS = {
    "tom": ("question", "questions"),
    "navigation": ("instruction", "instructions"),
    "sts": ("episode", "episodes"),
    "hexagons": ("procedure", "procedures"),
    "a3ds": ("picture pair", "picture pairs"),
}


@pytest.mark.parametrize("name", sorted(WORDS))
def test_each_kind_counts_its_items_in_its_own_words(name):
    kinds = all_kinds()
    if name not in kinds:
        pytest.skip(f"the {name} kind is not installed")
    one, many = WORDS[name]
    kind = kinds[name]
    assert (kind.item_word(1), kind.item_word(0), kind.item_word(2), kind.item_word()) == (one, many, many, many)


def test_a_plural_that_is_not_noun_plus_s_is_the_kinds_own():
    class Queries(CommonToM):
        item_noun: ClassVar[str] = "Query"
        item_noun_plural: ClassVar[str] = "Queries"

    assert (Queries().item_word(1), Queries().item_word(3)) == ("query", "queries")


def test_the_wait_page_says_why_in_the_kinds_words():
    """A task waiting on items leased to others names them as its pages do (a Hexagons
    worker once read "No question is free for you right now")."""
    from app.studies.views import wait_message

    kinds = all_kinds()
    if "hexagons" not in kinds:
        pytest.skip("the hexagons kind is not installed")
    assert wait_message(kinds["hexagons"]).startswith(
        "No procedure is free for you right now: the remaining procedures are being answered by other people"
    )
    assert wait_message(kinds["tom"]).startswith("No question is free for you right now: the remaining questions")


def test_a_kinds_mode_may_name_its_items_otherwise():
    """A Hexagons description study's items are target images (the paper's Description mode),
    on its consent, item, end, wait and preview pages alike; other settings keep the noun."""
    from app.studies.views import wait_message

    kind = all_kinds().get("hexagons")
    if kind is None:
        pytest.skip("the hexagons kind is not installed")
    description = {"mode": "description"}
    assert kind.item_noun_for(description) == "Target image" and kind.item_noun_for({}) == "Procedure"
    assert (kind.item_word(1, description), kind.item_word(3, description)) == ("target image", "target images")
    assert kind.item_word(3, {"mode": "execution"}) == "procedures"
    assert wait_message(kind, description).startswith("No target image is free for you right now")
