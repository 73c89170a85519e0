"""The dataset statistics the paper reports, recomputed from the released files
(`proctor hex stats`), with the paper's own figures beside them (docs/kinds/hexagons.md).

- Table 1: steps, procedures, tokens and unique images per annotation round (0 the
  preliminary rounds, the paper's "Recruitment"; 1 and 2 its rounds I and II). Tokens here
  are whitespace-separated words of the instructions; the paper does not say how it counted.
- Table 6: procedures and steps per split; an agreed step is one at least one verifier
  reproduced exactly (tag A, V1 or V2); an agreed procedure is one whose last step is agreed.
  Both are shares of the tagged procedures and steps (617-619 are untagged): this reproduces
  the paper's percentages (e.g. train 87.19% of steps, 392 / 493 = 79.51% of procedures).
- Section 5's dataset evaluation: the verifiers' mean board-based F1 and EM against the
  instructor (the mean of the two), and the max and min over the two verifiers, per step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from app.kinds.hexagons.formats import TAGS, Procedure
from app.kinds.hexagons.metrics import agreed

ROUND_NAMES = {"0": "Recruitment (preliminary)", "1": "Round I", "2": "Round II"}
# (steps, procedures, tokens, unique images) by round, Table 1.
PAPER_ROUNDS = {"0": (1045, 123, "21K", 17), "1": (1909, 304, "43K", 101), "2": (1223, 193, "36K", 63),
                "total": (4177, 620, "100K", 175)}
# (procedures, steps, agreed procedures, agreed procedures %, agreed steps %), Table 6.
PAPER_SPLITS = {"train": (496, 3278, 392, 79.51, 87.19), "dev": (62, 446, 49, 79.09, 85.43),
                "test": (62, 453, 43, 69.35, 83.22), "total": (620, 4177, 484, 78.44, 86.57)}
# Section 5: "The Max Mean-F1 score of circa 96" (Table 2's other figures are not in the text).
PAPER_MAX_MEAN_F1 = 96


def _pct(k: int, n: int) -> float | None:
    return round(100 * k / n, 2) if n else None


def split_stats(procs: Sequence[Procedure]) -> dict:
    steps = [s for p in procs for s in p.steps]
    tagged_procs = [p for p in procs if p.tagged]
    tagged_steps = [s for s in steps if s.tag is not None]
    agreed_procs = sum(agreed(p.steps[-1].tag) for p in tagged_procs)
    agreed_steps = sum(agreed(s.tag) for s in tagged_steps)
    tags = Counter(s.tag for s in tagged_steps)
    return {"procedures": len(procs), "steps": len(steps),
            "untagged_procedures": len(procs) - len(tagged_procs),
            "agreed_procedures": agreed_procs, "agreed_procedures_pct": _pct(agreed_procs, len(tagged_procs)),
            "agreed_steps_pct": _pct(agreed_steps, len(tagged_steps)),
            "all_A_procedures": sum(p.all_agreed for p in procs),
            "tags": {t: tags.get(t, 0) for t in TAGS}}


def verifier_agreement(procs: Sequence[Procedure]) -> dict:
    """Per step, the verifiers against the instructor: mean, max and min of the two board F1
    scores (agreement_scores' first two) and of their exact matches (from the tags), as
    percentages averaged over the tagged steps."""
    f1 = [s.scores[:2] for p in procs for s in p.steps if s.scores is not None]
    em = [{"A": (1, 1), "V1": (1, 0), "V2": (0, 1)}.get(s.tag, (0, 0)) for p in procs for s in p.steps
          if s.tag is not None]

    def three(pairs):
        n = len(pairs)
        if not n:
            return {"mean": None, "max": None, "min": None}
        return {"mean": round(100 * sum((a + b) / 2 for a, b in pairs) / n, 2),
                "max": round(100 * sum(max(a, b) for a, b in pairs) / n, 2),
                "min": round(100 * sum(min(a, b) for a, b in pairs) / n, 2)}

    return {"steps": len(f1), "f1": three(f1), "em": three(em)}


def round_stats(procs: Sequence[Procedure]) -> dict:
    out = {}
    for r in sorted({p.annotation_round for p in procs}):
        mine = [p for p in procs if p.annotation_round == r]
        out[r] = {"name": ROUND_NAMES.get(r, r), "steps": sum(len(p.steps) for p in mine), "procedures": len(mine),
                  "tokens": sum(len(s.instruction.split()) for p in mine for s in p.steps),
                  "unique_images": len({p.image_id for p in mine})}
    return out


def category_stats(procs: Sequence[Procedure]) -> dict:
    out = {}
    for c in sorted({p.category for p in procs}):
        mine = [p for p in procs if p.category == c]
        n_steps = sum(len(p.steps) for p in mine)
        tagged = [s for p in mine for s in p.steps if s.tag is not None]
        out[c] = {"procedures": len(mine), "steps": n_steps, "images": len({p.image_id for p in mine}),
                  "mean_steps": round(n_steps / len(mine), 2),
                  "agreed_steps_pct": _pct(sum(agreed(s.tag) for s in tagged), len(tagged))}
    return out


def dataset_stats(splits: Mapping[str, Sequence[Procedure]]) -> dict:
    """Everything above for the splits given (name -> procedures) and for all of them."""
    everything = [p for procs in splits.values() for p in procs]
    return {"splits": {**{name: split_stats(procs) for name, procs in splits.items()},
                       "total": split_stats(everything)},
            "rounds": round_stats(everything),
            "categories": category_stats(everything),
            "verifiers": verifier_agreement(everything),
            "images": len({p.image_id for p in everything}),
            "instructors": len({p.instructor_id for p in everything}),
            "tokens": sum(len(s.instruction.split()) for p in everything for s in p.steps),
            "paper": {"splits": PAPER_SPLITS, "rounds": PAPER_ROUNDS, "max_mean_f1": PAPER_MAX_MEAN_F1}}
