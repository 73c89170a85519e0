"""The dataset statistics the paper reports, recomputed from the released files
(`proctor hexagons stats`), with the paper's own figures beside them (docs/kinds/hexagons.md).

- Table 1: steps, procedures, tokens and unique images per annotation round (0 the
  preliminary rounds, the paper's "Recruitment"; 1 and 2 its rounds I and II). Tokens here
  are whitespace-separated words of the instructions; the paper does not say how it counted.
- Table 6: procedures and steps per split; an agreed step is one at least one verifier
  reproduced exactly (tag A, V1 or V2); an agreed procedure is one whose last step is agreed.
  Both are shares of the tagged procedures and steps (617-619 are untagged): this reproduces
  the paper's percentages (e.g. train 87.19% of steps, 392 / 493 = 79.51% of procedures).
- Section 5's dataset evaluation: the verifiers' mean board-based F1 and EM against the
  instructor (the mean of the two), and the max and min over the two verifiers, per step.
- Unique images: five procedures (492-496, train) were drawn for a second version of an image
  already in the data, named with an "a" after its id (P01C03T07a beside P01C03T07); counted
  as their base image, the rounds have 17/101/63 images and the data 175, the paper's figures.
- Consistency of the released tags with the released scores: the tag each step's score triple
  implies (A both I-V scores 1, V1 / V2 one, VV only V1-V2, F none) against the tag given.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence

from app.kinds.hexagons.formats import TAGS, Procedure
from app.kinds.hexagons.metrics import agreed, tag_of

ROUND_NAMES = {"0": "Recruitment (preliminary)", "1": "Round I", "2": "Round II"}
# (steps, procedures, tokens, unique images) by round, Table 1.
PAPER_ROUNDS = {
    "0": (1045, 123, "21K", 17),
    "1": (1909, 304, "43K", 101),
    "2": (1223, 193, "36K", 63),
    "total": (4177, 620, "100K", 175),
}
# (procedures, steps, agreed procedures, agreed procedures %, agreed steps %), Table 6.
PAPER_SPLITS = {
    "train": (496, 3278, 392, 79.51, 87.19),
    "dev": (62, 446, 49, 79.09, 85.43),
    "test": (62, 453, 43, 69.35, 83.22),
    "total": (620, 4177, 484, 78.44, 86.57),
}
# Section 5: "The Max Mean-F1 score of circa 96" (Table 2's other figures are not in the text).
PAPER_MAX_MEAN_F1 = 96


# A redrawn image: the base id and a lower-case letter (P01C03T07a).
REDRAWN = re.compile(r"^(.*\d)[a-z]$")


def base_image(image_id: str) -> str:
    """The image a redrawn image's id names (P01C03T07a -> P01C03T07); others unchanged."""
    m = REDRAWN.match(image_id)
    return m.group(1) if m else image_id


def _pct(k: int, n: int) -> float | None:
    return round(100 * k / n, 2) if n else None


def split_stats(procs: Sequence[Procedure]) -> dict:
    steps = [s for p in procs for s in p.steps]
    tagged_procs = [p for p in procs if p.tagged]
    tagged_steps = [s for s in steps if s.tag is not None]
    agreed_procs = sum(agreed(p.steps[-1].tag) for p in tagged_procs)
    agreed_steps = sum(agreed(s.tag) for s in tagged_steps)
    tags = Counter(s.tag for s in tagged_steps)
    return {
        "procedures": len(procs),
        "steps": len(steps),
        "untagged_procedures": len(procs) - len(tagged_procs),
        "agreed_procedures": agreed_procs,
        "agreed_procedures_pct": _pct(agreed_procs, len(tagged_procs)),
        "agreed_steps_pct": _pct(agreed_steps, len(tagged_steps)),
        "all_A_procedures": sum(p.all_agreed for p in procs),
        "tags": {t: tags.get(t, 0) for t in TAGS},
    }


def verifier_agreement(procs: Sequence[Procedure]) -> dict:
    """Per step, the verifiers against the instructor: mean, max and min of the two board F1
    scores (agreement_scores' first two) and of their exact matches (from the tags), as
    percentages averaged over the tagged steps."""
    f1 = [s.scores[:2] for p in procs for s in p.steps if s.scores is not None]
    em = [
        {"A": (1, 1), "V1": (1, 0), "V2": (0, 1)}.get(s.tag, (0, 0))
        for p in procs
        for s in p.steps
        if s.tag is not None
    ]

    def three(pairs):
        n = len(pairs)
        if not n:
            return {"mean": None, "max": None, "min": None}
        return {
            "mean": round(100 * sum((a + b) / 2 for a, b in pairs) / n, 2),
            "max": round(100 * sum(max(a, b) for a, b in pairs) / n, 2),
            "min": round(100 * sum(min(a, b) for a, b in pairs) / n, 2),
        }

    return {"steps": len(f1), "f1": three(f1), "em": three(em)}


def round_stats(procs: Sequence[Procedure]) -> dict:
    out = {}
    for r in sorted({p.annotation_round for p in procs}):
        mine = [p for p in procs if p.annotation_round == r]
        out[r] = {
            "name": ROUND_NAMES.get(r, r),
            "steps": sum(len(p.steps) for p in mine),
            "procedures": len(mine),
            "tokens": sum(len(s.instruction.split()) for p in mine for s in p.steps),
            "unique_images": len({p.image_id for p in mine}),
            "base_images": len({base_image(p.image_id) for p in mine}),
        }
    return out


def tag_from_scores(scores: tuple[float, float, float]) -> str:
    """The tag a step's (I-V1, I-V2, V1-V2) board F1 triple implies: board F1 is 1 exactly when
    the boards are equal (the release's two decimals could round 0.995 up; none does)."""
    i1, i2, v = (x == 1.0 for x in scores)
    return tag_of(i1, i2, v)


def _consistent(tag: str, scores: tuple[float, float, float]) -> bool:
    """The tag and the whole triple agree: a verifier equal to the instructor scores against the
    other verifier what the instructor does (V1: V1-V2 = I-V2), equal verifiers score alike."""
    a, b, c = scores
    if tag_from_scores(scores) != tag:
        return False
    return {"A": c == 1.0, "V1": c == b, "V2": c == a, "VV": a == b, "F": True}[tag]


def tag_consistency(procs: Sequence[Procedure]) -> dict:
    """Per tag, the tagged steps and how many disagree with their scores (tag_from_scores, then
    the third score), with up to five examples as "index/step"."""
    steps: Counter = Counter()
    bad: Counter = Counter()
    examples: dict[str, list[str]] = {}
    for p in procs:
        for s in p.steps:
            if s.tag is None or s.scores is None:
                continue
            steps[s.tag] += 1
            if not _consistent(s.tag, s.scores):
                bad[s.tag] += 1
                shown = examples.setdefault(s.tag, [])
                if len(shown) < 5:
                    shown.append(f"{p.index}/{s.position}")
    return {
        "steps": sum(steps.values()),
        "inconsistent": sum(bad.values()),
        "by_tag": {
            t: {"steps": steps.get(t, 0), "inconsistent": bad.get(t, 0), "examples": examples.get(t, [])} for t in TAGS
        },
    }


def agreed_procedure_definitions(procs: Sequence[Procedure]) -> dict[str, int]:
    """Tagged procedures counted as agreed under the definitions one might read into the paper
    (our figure is "last"; docs/kinds/hexagons.md compares them with Table 6)."""
    tagged = [p for p in procs if p.tagged]

    def last_change(p: Procedure) -> str:
        # The last step that changes the board (no-op final steps are tagged too).
        b = p.boards
        return next((p.steps[k - 1].tag for k in range(len(b) - 1, 0, -1) if b[k] != b[k - 1]), p.steps[-1].tag)

    return {
        "last": sum(agreed(p.steps[-1].tag) for p in tagged),
        "last_A": sum(p.steps[-1].tag == "A" for p in tagged),
        "last_not_F": sum(p.steps[-1].tag != "F" for p in tagged),
        "last_changing_step": sum(agreed(last_change(p)) for p in tagged),
        "every_step": sum(all(agreed(s.tag) for s in p.steps) for p in tagged),
        "no_F": sum(all(s.tag != "F" for s in p.steps) for p in tagged),
        "last_without_redrawn": sum(agreed(p.steps[-1].tag) for p in tagged if base_image(p.image_id) == p.image_id),
        "tagged": len(tagged),
    }


def category_stats(procs: Sequence[Procedure]) -> dict:
    out = {}
    for c in sorted({p.category for p in procs}):
        mine = [p for p in procs if p.category == c]
        n_steps = sum(len(p.steps) for p in mine)
        tagged = [s for p in mine for s in p.steps if s.tag is not None]
        out[c] = {
            "procedures": len(mine),
            "steps": n_steps,
            "images": len({p.image_id for p in mine}),
            "mean_steps": round(n_steps / len(mine), 2),
            "agreed_steps_pct": _pct(sum(agreed(s.tag) for s in tagged), len(tagged)),
        }
    return out


def dataset_stats(splits: Mapping[str, Sequence[Procedure]]) -> dict:
    """Everything above for the splits given (name -> procedures) and for all of them."""
    everything = [p for procs in splits.values() for p in procs]
    return {
        "splits": {**{name: split_stats(procs) for name, procs in splits.items()}, "total": split_stats(everything)},
        "rounds": round_stats(everything),
        "categories": category_stats(everything),
        "verifiers": verifier_agreement(everything),
        "images": len({p.image_id for p in everything}),
        "base_images": len({base_image(p.image_id) for p in everything}),
        "redrawn": [p.index for p in everything if base_image(p.image_id) != p.image_id],
        "tag_consistency": tag_consistency(everything),
        "agreed_definitions": {name: agreed_procedure_definitions(procs) for name, procs in splits.items()},
        "instructors": len({p.instructor_id for p in everything}),
        "tokens": sum(len(s.instruction.split()) for p in everything for s in p.steps),
        "paper": {"splits": PAPER_SPLITS, "rounds": PAPER_ROUNDS, "max_mean_f1": PAPER_MAX_MEAN_F1},
    }
