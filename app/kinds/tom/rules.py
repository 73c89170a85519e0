"""Common-ToM gold answers and question wording (Soubki et al. 2024, section 3).

A question asks, about one proposition p at one utterance (marked 🛑), whether a speaker
chain believes p with a certainty q. The answer follows from the annotated beliefs
Bel(X) in {CT+, PS, CT-, NB} and common-ground labels CG(X) in {JA, IN, RT, NA}:

- order 1, "X believes it is q true that p":
  Yes iff q = Bel(X), or q = PS and Bel(X) = CT+ (certainty implies possibility);
- order 2, "X believes that Y believes it is q true that p":
  Yes iff (q in {CT+, PS} and CG(X) in {JA, IN} and the order-1 condition holds for X),
  or (q = CT- and CG(X) = RT and Bel(Y) = CT-);
- order 3, "X believes that Y believes that X believes it is q true that p":
  as order 2, but the negative case is q = CT- and CG(X) in {RT, NA} and Bel(X) = CT-.
"""

from __future__ import annotations

import re

from app.errors import InputError

SPEAKERS = ("A", "B")
BELIEFS = ("CT+", "PS", "CT-", "NB")
CG_LABELS = ("JA", "IN", "RT", "NA")
CERTAINTIES = ("CT+", "PS", "CT-")
# Every chain without self-belief (the paper omits "A believes A believes"), up to order 3.
CHAINS = (("A",), ("B",), ("A", "B"), ("B", "A"), ("A", "B", "A"), ("B", "A", "B"))
CERTAINTY_WORDS = {"CT+": "certainly", "PS": "possibly", "CT-": "certainly not"}
STOP = "🛑"
STOP_VS16 = "🛑\ufe0f"  # the same sign written with the emoji variation selector

_POSITIVE = ("CT+", "PS")
_IN_CG = ("JA", "IN")


def _first_order(certainty: str, belief: str) -> bool:
    return certainty == belief or (certainty == "PS" and belief == "CT+")


def gold_answer(chain: tuple[str, ...], certainty: str, belief: dict[str, str], cg: dict[str, str]) -> bool:
    """The rule answer (True = Yes) for `chain` believing p with `certainty`.

    `belief` and `cg` map each speaker ("A", "B") to its label at the point asked about.
    Raises ValueError for a chain or label outside the sets above.
    """
    chain = tuple(chain)
    if chain not in CHAINS:
        raise ValueError(f"unknown speaker chain {chain!r}")
    if certainty not in CERTAINTIES:
        raise ValueError(f"unknown certainty {certainty!r}")
    for who in SPEAKERS:
        if belief.get(who) not in BELIEFS:
            raise ValueError(f"belief of {who} must be one of {', '.join(BELIEFS)}, not {belief.get(who)!r}")
        if cg.get(who) not in CG_LABELS:
            raise ValueError(f"CG of {who} must be one of {', '.join(CG_LABELS)}, not {cg.get(who)!r}")

    x = chain[0]
    if len(chain) == 1:
        return _first_order(certainty, belief[x])
    if certainty in _POSITIVE:
        # X holds p in its common ground, so X answers for Y as X would for itself.
        return cg[x] in _IN_CG and _first_order(certainty, belief[x])
    if len(chain) == 2:
        return cg[x] == "RT" and belief[chain[1]] == "CT-"
    # Order 3 comes back to X: X's own rejection counts even before p entered the CG (NA).
    return cg[x] in ("RT", "NA") and belief[x] == "CT-"


def question_text(chain: tuple[str, ...], certainty: str, proposition: str) -> str:
    """The question in the paper's template, e.g. '... A believes that B believes it is possibly true that p?'"""
    if tuple(chain) not in CHAINS:
        raise ValueError(f"unknown speaker chain {chain!r}")
    beliefs = " that ".join(f"{who} believes" for who in chain)
    return (
        f"At the time indicated by {STOP}, is it the case that {beliefs} "
        f"it is {CERTAINTY_WORDS[certainty]} true that {proposition}?"
    )


_QUESTION = re.compile(
    r"At\s+the\s+time\s+indicated\s+by\s+" + STOP + "\ufe0f?" + r"\s*,\s*is\s+it\s+the\s+case\s+that\s+"
    r"(?P<chain>(?:[AB]\s+believes\s+that\s+)*[AB]\s+believes)\s+"
    r"it\s+is\s+(?P<certainty>certainly\s+not|certainly|possibly)\s+true\s+that\s+(?P<prop>.+)",
    re.DOTALL,
)
_WORD_CERTAINTY = {"certainly": "CT+", "possibly": "PS", "certainly not": "CT-"}


def parse_question(text: str) -> tuple[tuple[str, ...], str, str]:
    """(chain, certainty, proposition) from a question in the template; InputError(field='question') otherwise."""
    body = text.strip().rstrip("?").rstrip()
    m = _QUESTION.fullmatch(body)
    if not m:
        raise InputError(
            "the question does not follow the template 'At the time indicated by 🛑, is it the case that "
            "X believes [that Y believes [that X believes]] it is certainly/possibly/certainly not true that ...?'",
            field="question",
        )
    chain = tuple(re.findall(r"[AB]", m["chain"]))
    if chain not in CHAINS:
        raise InputError(
            f"the speaker chain {' > '.join(chain)} is not one of the six allowed (A, B, A>B, B>A, A>B>A, B>A>B)",
            field="question",
        )
    certainty = _WORD_CERTAINTY[" ".join(m["certainty"].split())]
    return chain, certainty, m["prop"].strip()
