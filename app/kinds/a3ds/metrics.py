"""The pragmatic metrics of a caption in a reference game (paper section 2.2; DESIGN.md
section 6 holds the exact forms, which follow the public reference code):

C = {i : t_i != d_i}, z = |C|; c = contrastive features mentioned; k = features of the target
mentioned; discriminativity = [c > 0]; contrastive efficiency (only when c > 0) = 1 if z = 1
and c = 1, else 1 - (c-1)/(z-1); relevance = 1 - (k-c)/(6-z), undefined when z = 6 (nothing
is redundant); optimal discriminativity = [c = 1].

A mention counts for the target when its words can mean the target's value, and as
contrastive when they cannot mean the distractor's too. Orientations that share a phrase
("in the middle" for 6, 7 and 8) differ without words to tell them apart: such a mention of a
contrastive feature counts in k but is neither contrastive nor redundant (`ambiguous`), so
relevance uses k - c - ambiguous (the same as k - c whenever nothing is ambiguous)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from app.kinds.a3ds.captions import Parsed, parse
from app.kinds.a3ds.scenes import FEATURES, Pair, factors

# Keys of a caption's scores, in the order tables show them, and their names in the paper.
KEYS = ("discriminative", "contrastive_efficiency", "relevance", "optimal", "n_mentioned")
LABELS = {
    "discriminative": "Discriminativity",
    "contrastive_efficiency": "Contrastive efficiency",
    "relevance": "Relevance",
    "optimal": "Optimal discriminativity",
    "n_mentioned": "Features mentioned",
}


@dataclass
class CaptionScore:
    z: int
    c: int
    k: int
    discriminative: int
    contrastive_efficiency: float | None
    relevance: float | None  # None when z = 6: undefined
    optimal: int
    mentioned: list[str]  # features the caption names, true of the target or not
    false: list[str]  # named with words that cannot mean the target's value
    ambiguous: list[str]  # contrastive, named in words that fit both scenes
    unparsed: list[str]

    @property
    def n_mentioned(self) -> int:
        return len(self.mentioned)

    def as_dict(self) -> dict:
        """The per-pair record of `proctor a3ds score --json`: every field but the false
        and ambiguous mentions (stored() adds them)."""
        return {k: v for k, v in asdict(self).items() if k not in ("false", "ambiguous")}

    def stored(self) -> dict:
        return {**self.as_dict(), "n_mentioned": self.n_mentioned, "false": self.false, "ambiguous": self.ambiguous}


def contrastive_efficiency(c: int, z: int) -> float | None:
    if c <= 0:
        return None
    if z == 1:
        return 1.0  # c = 1
    return 1.0 - (c - 1) / (z - 1)


def relevance(redundant: int, z: int) -> float | None:
    if z == 6:
        return None
    return 1.0 - redundant / (6 - z)


def score_mentions(pair: Pair, parsed: Parsed) -> CaptionScore:
    t, d = factors(pair.target), factors(pair.distractor)
    contrastive = set(pair.contrastive)
    z = len(contrastive)
    if z == 0:
        raise ValueError("target and distractor are the same scene")
    k = c = ambiguous_n = redundant = 0
    false, ambiguous = [], []
    for f, ti, di in zip(FEATURES, t, d):
        values = parsed.mentions.get(f)
        if values is None:
            continue
        if ti not in values:
            false.append(f)
            continue
        k += 1
        if f not in contrastive:
            redundant += 1
        elif di in values:
            ambiguous_n += 1
            ambiguous.append(f)
        else:
            c += 1
    return CaptionScore(
        z=z,
        c=c,
        k=k,
        discriminative=int(c > 0),
        contrastive_efficiency=contrastive_efficiency(c, z),
        relevance=relevance(redundant, z),
        optimal=int(c == 1),
        mentioned=parsed.mentioned,
        false=false,
        ambiguous=ambiguous,
        unparsed=list(parsed.unparsed),
    )


def score_caption(target: int, distractor: int, caption: str) -> CaptionScore:
    return score_mentions(Pair(target, distractor), parse(caption, target))


def means(scores: list[CaptionScore]) -> dict:
    """Means over pairs; contrastive efficiency over discriminative captions only, relevance
    over pairs with z < 6 (how many of each is given)."""

    def mean(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else None

    return {
        "n": len(scores),
        "z": mean([s.z for s in scores]),
        "c": mean([s.c for s in scores]),
        "k": mean([s.k for s in scores]),
        "discriminative": mean([s.discriminative for s in scores]),
        "contrastive_efficiency": mean([s.contrastive_efficiency for s in scores]),
        "n_contrastive_efficiency": sum(s.contrastive_efficiency is not None for s in scores),
        "relevance": mean([s.relevance for s in scores]),
        "n_relevance": sum(s.relevance is not None for s in scores),
        "relevance_undefined": sum(s.relevance is None for s in scores),
        "optimal": mean([s.optimal for s in scores]),
        "mentioned": mean([s.n_mentioned for s in scores]),
        "false": mean([len(s.false) for s in scores]),
        "unparsed": sum(bool(s.unparsed) for s in scores),
    }
