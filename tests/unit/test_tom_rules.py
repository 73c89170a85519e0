"""Common-ToM gold-answer rules and question wording."""

import pytest

from app.errors import InputError
from app.kinds.tom.rules import CERTAINTIES, CHAINS, gold_answer, parse_question, question_text


def answer(chain, q, bel_a, bel_b, cg_a="NA", cg_b="NA"):
    return gold_answer(tuple(chain), q, {"A": bel_a, "B": bel_b}, {"A": cg_a, "B": cg_b})


# --- order 1: Bel(X) matches, and certainly implies possibly ----------------------------


@pytest.mark.parametrize(
    "bel, yes_for",
    [
        ("CT+", {"CT+", "PS"}),  # the caveat: CT+ also answers "possibly"
        ("PS", {"PS"}),  # but PS does not answer "certainly"
        ("CT-", {"CT-"}),
        ("NB", set()),
    ],
)
def test_order1_matches_belief_with_possibly_caveat(bel, yes_for):
    for q in CERTAINTIES:
        assert answer("A", q, bel, "NB") == (q in yes_for)
        assert answer("B", q, "NB", bel) == (q in yes_for)


def test_order1_ignores_common_ground():
    assert answer("A", "CT+", "CT+", "CT-", cg_a="RT", cg_b="RT")
    assert not answer("A", "CT-", "CT+", "CT-", cg_a="RT", cg_b="RT")


# --- order 2 ----------------------------------------------------------------------------


def test_order2_positive_needs_cg_of_x():
    assert answer("AB", "PS", "CT+", "NB", cg_a="JA")  # CT+ believer, caveat holds
    assert answer("AB", "CT+", "CT+", "NB", cg_a="IN")
    assert not answer("AB", "CT+", "CT+", "CT+", cg_a="NA")  # not (yet) in A's CG
    assert not answer("AB", "CT+", "CT+", "CT+", cg_a="RT")
    assert not answer("AB", "CT+", "PS", "CT+", cg_a="JA")  # order-1 condition for A fails
    assert answer("BA", "PS", "NB", "PS", cg_b="JA")  # X = B uses Bel(B), CG(B)
    assert not answer("BA", "PS", "PS", "NB", cg_a="JA", cg_b="NA")


def test_order2_negative_needs_rt_and_bel_of_y():
    # A is aware p was rejected (RT) and B is certain it is false.
    assert answer("AB", "CT-", "NB", "CT-", cg_a="RT")
    assert not answer("AB", "CT-", "CT-", "PS", cg_a="RT")  # Bel(Y) decides, not Bel(X)
    assert not answer("AB", "CT-", "NB", "CT-", cg_a="NA")  # NA counts only at order 3
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
    assert not answer("AB", "CT-", "CT-", "CT-", cg_a="NA")  # the same labels at order 2: No
    assert not answer("ABA", "CT-", "NB", "CT-", cg_a="NA")  # Bel(X) decides here
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
        "that B believes that A believes that B believes it is certainly not true that p?"
    )


@pytest.mark.parametrize("chain", CHAINS)
@pytest.mark.parametrize("certainty", CERTAINTIES)
def test_question_round_trip(chain, certainty):
    prop = "the bakery on Elm Street has closed"
    assert parse_question(question_text(chain, certainty, prop)) == (chain, certainty, prop)


@pytest.mark.parametrize(
    "variant",
    [
        lambda t: t[:-1],  # no question mark
        lambda t: t + "?",  # an extra one
        lambda t: "  " + t + " \n",  # surrounding whitespace
        lambda t: t.replace("🛑", "🛑\ufe0f"),  # emoji variation selector
    ],
)
def test_parse_question_tolerates(variant):
    text = question_text(("B", "A"), "CT+", "it will rain on Sunday")
    assert parse_question(variant(text)) == (("B", "A"), "CT+", "it will rain on Sunday")


@pytest.mark.parametrize(
    "text",
    [
        "Is it going to rain?",
        "At the time indicated by 🛑, is it the case that A believes that A believes it is certainly true that p?",
        "At the time indicated by 🛑, is it the case that A believes that B believes that A believes that B believes "
        "it is certainly true that p?",
        "At the time indicated by 🛑, is it the case that A believes it is probably true that p?",
        "At the time indicated by 🛑, is it the case that C believes it is certainly true that p?",
        "At the time indicated by 🛑, is it the case that A believes it is certainly true that ?",
    ],
)
def test_parse_question_refuses(text):
    with pytest.raises(InputError) as err:
        parse_question(text)
    assert err.value.field == "question"


# --- exhaustive check against an independent oracle ---------------------------------------
# The oracle restates the module docstring's rules (Soubki et al. 2024, section 3) literally,
# with its own label sets, so a change to any branch of gold_answer is caught.

import itertools

ORACLE_BELIEFS = ["CT+", "PS", "CT-", "NB"]
ORACLE_CG = ["JA", "IN", "RT", "NA"]
ORACLE_CHAINS = [("A",), ("B",), ("A", "B"), ("B", "A"), ("A", "B", "A"), ("B", "A", "B")]


def oracle(chain, q, bel, cg):
    x = chain[0]
    order1 = q == bel[x] or (q == "PS" and bel[x] == "CT+")
    if len(chain) == 1:
        return order1
    positive = q in ("CT+", "PS") and cg[x] in ("JA", "IN") and order1
    if len(chain) == 2:
        y = chain[1]
        return positive or (q == "CT-" and cg[x] == "RT" and bel[y] == "CT-")
    return positive or (q == "CT-" and cg[x] in ("RT", "NA") and bel[x] == "CT-")


def test_gold_answer_matches_the_oracle_on_every_combination():
    yes = 0
    for chain in ORACLE_CHAINS:
        for q in ("CT+", "PS", "CT-"):
            for bel_a, bel_b, cg_a, cg_b in itertools.product(ORACLE_BELIEFS, ORACLE_BELIEFS, ORACLE_CG, ORACLE_CG):
                bel, cg = {"A": bel_a, "B": bel_b}, {"A": cg_a, "B": cg_b}
                want = oracle(chain, q, bel, cg)
                got = gold_answer(chain, q, dict(bel), dict(cg))
                assert got is want, (chain, q, bel, cg)
                yes += want
    # 6 chains x 3 certainties x 256 label combinations; the count pins the oracle itself.
    assert yes == 992  # 2 x 256 (order 1) + 2 x 112 (order 2) + 2 x 128 (order 3)


def test_gold_answer_accepts_a_list_chain_and_does_not_mutate_its_inputs():
    bel, cg = {"A": "CT+", "B": "NB"}, {"A": "JA", "B": "NA"}
    assert gold_answer(["A", "B"], "PS", bel, cg) is True
    assert gold_answer(["B", "A"], "PS", bel, cg) is False
    assert bel == {"A": "CT+", "B": "NB"} and cg == {"A": "JA", "B": "NA"}


def test_module_label_sets_are_the_papers():
    from app.kinds.tom import rules

    assert rules.SPEAKERS == ("A", "B")
    assert rules.BELIEFS == ("CT+", "PS", "CT-", "NB")
    assert rules.CG_LABELS == ("JA", "IN", "RT", "NA")
    assert rules.CERTAINTIES == ("CT+", "PS", "CT-")
    assert rules.CHAINS == tuple(ORACLE_CHAINS)
    assert rules.CERTAINTY_WORDS == {"CT+": "certainly", "PS": "possibly", "CT-": "certainly not"}
    assert rules.STOP == "\U0001f6d1" and rules.STOP_VS16 == "\U0001f6d1\ufe0f"


GOOD_BEL = {"A": "CT+", "B": "CT-"}
GOOD_CG = {"A": "RT", "B": "RT"}


@pytest.mark.parametrize(
    "chain, q, bel, cg, message",
    [
        (("A", "A"), "CT+", GOOD_BEL, GOOD_CG, "unknown speaker chain ('A', 'A')"),
        ((), "CT+", GOOD_BEL, GOOD_CG, "unknown speaker chain ()"),
        (("C",), "CT+", GOOD_BEL, GOOD_CG, "unknown speaker chain ('C',)"),
        (("A", "B", "A", "B"), "CT+", GOOD_BEL, GOOD_CG, "unknown speaker chain ('A', 'B', 'A', 'B')"),
        (("A",), "NB", GOOD_BEL, GOOD_CG, "unknown certainty 'NB'"),
        (("A",), "ct+", GOOD_BEL, GOOD_CG, "unknown certainty 'ct+'"),
        (("A",), "CT+", {"A": "XX", "B": "CT-"}, GOOD_CG, "belief of A must be one of CT+, PS, CT-, NB, not 'XX'"),
        (("A",), "CT+", {"A": "CT+", "B": "JA"}, GOOD_CG, "belief of B must be one of CT+, PS, CT-, NB, not 'JA'"),
        (("A",), "CT+", {"A": "CT+"}, GOOD_CG, "belief of B must be one of CT+, PS, CT-, NB, not None"),
        (("A",), "CT+", GOOD_BEL, {"A": "JX", "B": "RT"}, "CG of A must be one of JA, IN, RT, NA, not 'JX'"),
        (("A", "B"), "CT+", GOOD_BEL, {"A": "JA", "B": "ja"}, "CG of B must be one of JA, IN, RT, NA, not 'ja'"),
        (("A", "B", "A"), "CT-", GOOD_BEL, {"B": "RT"}, "CG of A must be one of JA, IN, RT, NA, not None"),
        (("A",), "CT+", GOOD_BEL, {"A": "RT", "B": "CT+"}, "CG of B must be one of JA, IN, RT, NA, not 'CT+'"),
    ],
)
def test_gold_answer_refuses_unknown_chains_and_labels(chain, q, bel, cg, message):
    with pytest.raises(ValueError) as err:
        gold_answer(chain, q, bel, cg)
    assert str(err.value) == message


def test_mistyped_common_ground_label_is_refused_not_read_as_no():
    # "JX" for "JA" must not silently turn every positive order-2/3 answer into "No".
    for chain in (("A", "B"), ("A", "B", "A")):
        with pytest.raises(ValueError, match="CG of A"):
            gold_answer(chain, "CT+", {"A": "CT+", "B": "CT+"}, {"A": "JX", "B": "JA"})
    # the label of the other speaker is checked too, even though the rule does not read it
    with pytest.raises(ValueError, match="CG of B"):
        gold_answer(("A",), "CT+", {"A": "CT+", "B": "CT+"}, {"A": "JA", "B": "JX"})


# --- question text, exactly --------------------------------------------------------------

QUESTION_PREFIX = "At the time indicated by \U0001f6d1, is it the case that "
CHAIN_WORDS = {
    ("A",): "A believes",
    ("B",): "B believes",
    ("A", "B"): "A believes that B believes",
    ("B", "A"): "B believes that A believes",
    ("A", "B", "A"): "A believes that B believes that A believes",
    ("B", "A", "B"): "B believes that A believes that B believes",
}
CERTAINTY_PHRASE = {"CT+": "certainly", "PS": "possibly", "CT-": "certainly not"}


@pytest.mark.parametrize("chain", ORACLE_CHAINS)
@pytest.mark.parametrize("certainty", ["CT+", "PS", "CT-"])
def test_question_text_exact(chain, certainty):
    want = f"{QUESTION_PREFIX}{CHAIN_WORDS[chain]} it is {CERTAINTY_PHRASE[certainty]} true that the door is open?"
    assert question_text(chain, certainty, "the door is open") == want
    assert question_text(list(chain), certainty, "the door is open") == want


def test_question_text_examples_verbatim():
    assert question_text(("A",), "CT+", "p") == (
        "At the time indicated by 🛑, is it the case that A believes it is certainly true that p?"
    )
    assert question_text(("B", "A", "B"), "CT-", "it rains") == (
        "At the time indicated by 🛑, is it the case that B believes that A believes that B believes "
        "it is certainly not true that it rains?"
    )


def test_question_text_refuses_unknown_chains():
    with pytest.raises(ValueError) as err:
        question_text(("B", "B"), "CT+", "p")
    assert str(err.value) == "unknown speaker chain ('B', 'B')"
    with pytest.raises(ValueError) as err:
        question_text(["A", "C"], "CT+", "p")
    assert str(err.value) == "unknown speaker chain ['A', 'C']"


# --- parsing, exactly ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        # extra and odd whitespace everywhere the template has a space
        (
            "At  the\ttime indicated\nby 🛑 ,  is it the  case that A  believes that\tB believes it is "
            "certainly   not true  that  the shop is shut ?",
            (("A", "B"), "CT-", "the shop is shut"),
        ),
        ("At the time indicated by 🛑,is it the case that B believes it is possibly true that x", (("B",), "PS", "x")),
        # the emoji variation selector (VS16) after the stop sign, with and without a space
        (
            "At the time indicated by 🛑\ufe0f, is it the case that A believes it is certainly true that p?",
            (("A",), "CT+", "p"),
        ),
        (
            "At the time indicated by 🛑\ufe0f , is it the case that A believes that B believes that A believes "
            "it is certainly true that p?",
            (("A", "B", "A"), "CT+", "p"),
        ),
        # several question marks and surrounding whitespace; the proposition keeps inner text verbatim
        (
            "\n  At the time indicated by 🛑, is it the case that B believes that A believes that B believes it is "
            "possibly true that a ? b  ?? \t\n",
            (("B", "A", "B"), "PS", "a ? b"),
        ),
        # a proposition over several lines
        (
            "At the time indicated by 🛑, is it the case that B believes that A believes it is certainly not "
            "true that one\ntwo?",
            (("B", "A"), "CT-", "one\ntwo"),
        ),
        # only question marks are stripped from the end, never letters of the proposition
        (
            "At the time indicated by 🛑, is it the case that A believes it is possibly true that box X?",
            (("A",), "PS", "box X"),
        ),
        (
            "At the time indicated by 🛑, is it the case that A believes it is possibly true that XX",
            (("A",), "PS", "XX"),
        ),
        # "certainly not" is not misread as "certainly" with a proposition starting "not"
        (
            "At the time indicated by 🛑, is it the case that A believes it is certainly not true that p",
            (("A",), "CT-", "p"),
        ),
    ],
)
def test_parse_question_exact(text, expected):
    assert parse_question(text) == expected


TEMPLATE_MESSAGE = (
    "the question does not follow the template 'At the time indicated by 🛑, is it the case that "
    "X believes [that Y believes [that X believes]] it is certainly/possibly/certainly not true that ...?'"
)


@pytest.mark.parametrize(
    "text, message",
    [
        ("Is it going to rain?", TEMPLATE_MESSAGE),
        ("", TEMPLATE_MESSAGE),
        ("At the time indicated by 🛑, is it the case that A believes it is certainly true that ?", TEMPLATE_MESSAGE),
        (
            "At the time indicated by 🛑🛑, is it the case that A believes it is certainly true that p?",
            TEMPLATE_MESSAGE,
        ),
        ("At the time indicated by, is it the case that A believes it is certainly true that p?", TEMPLATE_MESSAGE),
        ("At the time indicated by 🛑, is it the case that A believes it is certainly false that p?", TEMPLATE_MESSAGE),
        (
            "At the time indicated by 🛑, is it the case that A believes that it is certainly true that p?",
            TEMPLATE_MESSAGE,
        ),
        ("at the time indicated by 🛑, is it the case that A believes it is certainly true that p?", TEMPLATE_MESSAGE),
        ("Xt the time indicated by 🛑, is it the case that A believes it is certainly true that p?", TEMPLATE_MESSAGE),
        ("At the time indicated by 🛑, is it the case that A believes it is certainly true that", TEMPLATE_MESSAGE),
        # only whitespace where the proposition should be
        ("At the time indicated by 🛑, is it the case that A believes it is certainly true that  ?", TEMPLATE_MESSAGE),
        (
            "At the time indicated by 🛑, is it the case that A believes it is certainly true that \t \n?",
            TEMPLATE_MESSAGE,
        ),
        (
            "At the time indicated by 🛑, is it the case that A believes that A believes it is certainly true that p?",
            "the speaker chain A > A is not one of the six allowed (A, B, A>B, B>A, A>B>A, B>A>B)",
        ),
        (
            "At the time indicated by 🛑, is it the case that B believes that A believes that A believes "
            "it is possibly true that p?",
            "the speaker chain B > A > A is not one of the six allowed (A, B, A>B, B>A, A>B>A, B>A>B)",
        ),
        (
            "At the time indicated by 🛑, is it the case that A believes that B believes that A believes that "
            "B believes it is certainly true that p?",
            "the speaker chain A > B > A > B is not one of the six allowed (A, B, A>B, B>A, A>B>A, B>A>B)",
        ),
    ],
)
def test_parse_question_refusals_exact(text, message):
    with pytest.raises(InputError) as err:
        parse_question(text)
    assert err.value.field == "question"
    assert err.value.line is None
    assert err.value.message == message
