"""Common-ToM gold-answer rules and question wording."""

import pytest

from app.errors import InputError
from app.kinds.tom.rules import CERTAINTIES, CHAINS, gold_answer, parse_question, question_text


def answer(chain, q, bel_a, bel_b, cg_a="NA", cg_b="NA"):
    return gold_answer(tuple(chain), q, {"A": bel_a, "B": bel_b}, {"A": cg_a, "B": cg_b})


# --- order 1: Bel(X) matches, and certainly implies possibly ----------------------------

@pytest.mark.parametrize("bel, yes_for", [
    ("CT+", {"CT+", "PS"}),  # the caveat: CT+ also answers "possibly"
    ("PS", {"PS"}),          # but PS does not answer "certainly"
    ("CT-", {"CT-"}),
    ("NB", set()),
])
def test_order1_matches_belief_with_possibly_caveat(bel, yes_for):
    for q in CERTAINTIES:
        assert answer("A", q, bel, "NB") == (q in yes_for)
        assert answer("B", q, "NB", bel) == (q in yes_for)


def test_order1_ignores_common_ground():
    assert answer("A", "CT+", "CT+", "CT-", cg_a="RT", cg_b="RT")
    assert not answer("A", "CT-", "CT+", "CT-", cg_a="RT", cg_b="RT")


# --- order 2 ----------------------------------------------------------------------------

def test_order2_positive_needs_cg_of_x():
    assert answer("AB", "PS", "CT+", "NB", cg_a="JA")      # CT+ believer, caveat holds
    assert answer("AB", "CT+", "CT+", "NB", cg_a="IN")
    assert not answer("AB", "CT+", "CT+", "CT+", cg_a="NA")  # not (yet) in A's CG
    assert not answer("AB", "CT+", "CT+", "CT+", cg_a="RT")
    assert not answer("AB", "CT+", "PS", "CT+", cg_a="JA")  # order-1 condition for A fails
    assert answer("BA", "PS", "NB", "PS", cg_b="JA")        # X = B uses Bel(B), CG(B)
    assert not answer("BA", "PS", "PS", "NB", cg_a="JA", cg_b="NA")


def test_order2_negative_needs_rt_and_bel_of_y():
    # A is aware p was rejected (RT) and B is certain it is false.
    assert answer("AB", "CT-", "NB", "CT-", cg_a="RT")
    assert not answer("AB", "CT-", "CT-", "PS", cg_a="RT")    # Bel(Y) decides, not Bel(X)
    assert not answer("AB", "CT-", "NB", "CT-", cg_a="NA")    # NA counts only at order 3
    assert not answer("AB", "CT-", "CT-", "CT-", cg_a="IN")
    assert answer("BA", "CT-", "CT-", "NB", cg_b="RT")
    assert not answer("BA", "CT-", "CT-", "NB", cg_a="RT", cg_b="JA")


# --- order 3 ----------------------------------------------------------------------------

def test_order3_positive_like_order2():
    assert answer("ABA", "PS", "CT+", "NB", cg_a="IN")
    assert not answer("ABA", "CT+", "CT+", "CT+", cg_a="NA")
    assert answer("BAB", "CT+", "NB", "CT+", cg_b="JA")


def test_order3_negative_accepts_na_and_uses_bel_of_x():
    assert answer("ABA", "CT-", "CT-", "NB", cg_a="NA")
    assert answer("ABA", "CT-", "CT-", "NB", cg_a="RT")
    assert not answer("AB", "CT-", "CT-", "CT-", cg_a="NA")   # the same labels at order 2: No
    assert not answer("ABA", "CT-", "NB", "CT-", cg_a="NA")   # Bel(X) decides here
    assert not answer("ABA", "CT-", "CT-", "CT-", cg_a="JA")
    assert answer("BAB", "CT-", "NB", "CT-", cg_b="RT")


def test_table1_smoking_example():
    """Paper Table 1: 'B is now not smoking', before (116) and after (117) B says 'I am smoking'."""
    before = dict(bel_a="NB", bel_b="CT-", cg_a="NA", cg_b="NA")
    after = dict(bel_a="CT-", bel_b="CT-", cg_a="RT", cg_b="RT")
    # Does A believe it is certainly not true that B is now not smoking?
    assert not answer("A", "CT-", **before)
    assert answer("A", "CT-", **after)
    # Does B believe that A believes it is certainly not true that ...?
    assert not answer("BA", "CT-", **before)
    assert answer("BA", "CT-", **after)


def test_bad_labels_raise():
    with pytest.raises(ValueError):
        answer("A", "CT+", "XX", "NB")
    with pytest.raises(ValueError):
        answer("AA", "CT+", "CT+", "NB")
    with pytest.raises(ValueError):
        answer("A", "NB", "CT+", "NB")


# --- question text ----------------------------------------------------------------------

def test_question_text_matches_paper_wording():
    assert question_text(("A", "B"), "PS", "B is now not smoking") == (
        "At the time indicated by 🛑, is it the case that A believes that B believes "
        "it is possibly true that B is now not smoking?"
    )
    assert question_text(("B", "A", "B"), "CT-", "p").endswith(
        "that B believes that A believes that B believes it is certainly not true that p?")


@pytest.mark.parametrize("chain", CHAINS)
@pytest.mark.parametrize("certainty", CERTAINTIES)
def test_question_round_trip(chain, certainty):
    prop = "the bakery on Elm Street has closed"
    assert parse_question(question_text(chain, certainty, prop)) == (chain, certainty, prop)


@pytest.mark.parametrize("variant", [
    lambda t: t[:-1],                 # no question mark
    lambda t: t + "?",                # an extra one
    lambda t: "  " + t + " \n",       # surrounding whitespace
    lambda t: t.replace("🛑", "🛑\ufe0f"),  # emoji variation selector
])
def test_parse_question_tolerates(variant):
    text = question_text(("B", "A"), "CT+", "it will rain on Sunday")
    assert parse_question(variant(text)) == (("B", "A"), "CT+", "it will rain on Sunday")


@pytest.mark.parametrize("text", [
    "Is it going to rain?",
    "At the time indicated by 🛑, is it the case that A believes that A believes it is certainly true that p?",
    "At the time indicated by 🛑, is it the case that A believes that B believes that A believes that B believes "
    "it is certainly true that p?",
    "At the time indicated by 🛑, is it the case that A believes it is probably true that p?",
    "At the time indicated by 🛑, is it the case that C believes it is certainly true that p?",
    "At the time indicated by 🛑, is it the case that A believes it is certainly true that ?",
])
def test_parse_question_refuses(text):
    with pytest.raises(InputError) as err:
        parse_question(text)
    assert err.value.field == "question"
