"""Abstraction levels and mechanisms of an instruction (Lachmy et al. 2022: the mechanisms of
section 3 and Table 4, the four levels of section 5's qualitative analysis).

A label is {"level": 0-3 or null, "mechanisms": [names]}. Executors label each step they
execute when a study has `label_abstraction` (the labels travel in the execution response);
admins label a step on the consolidation page, by hand or by adopting the executors' majority,
into Item.reference["abstraction"]: one label per step (the leaderboard's per-level breakdown
reads reference["abstraction"][k]["level"])."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# level -> (the paper's name, its definition)
LEVELS: dict[int, tuple[str, str]] = {
    0: (
        "No abstraction",
        "concrete instructions: the coordinates and colours to paint, absolute (\u201cpaint "
        "the third hexagon in the sixth column green\u201d) or relative (\u201cpaint the tile below this tile red\u201d)",
    ),
    1: (
        "Low-level abstraction",
        "a collection of tiles is one object by the shape it forms, when it forms a "
        "vertical or diagonal line (\u201cpaint the first column from the left green\u201d)",
    ),
    2: (
        "Mid-level abstraction",
        "multiple tiles define an object beyond lines, by an abstraction mechanism "
        "applied to multiple tiles (\u201cmake a red flower\u201d)",
    ),
    3: (
        "High-level abstraction",
        "abstraction mechanisms applied to multiple objects, which themselves can "
        "be complex or abstract (\u201crepeat the flower along the row, green centres for red flowers\u201d)",
    ),
}
# mechanism -> (the paper's name, its example from Table 4)
MECHANISMS: dict[str, tuple[str, str]] = {
    "bounded iteration": (
        "Bounded iterations ('for' loops)",
        "\u201cMake four more caterpillars below the "
        "original leaving an empty space between every two caterpillar.\u201d",
    ),
    "conditional iteration": (
        "Conditional iterations ('while' loops)",
        "\u201cRepeat this pattern until you run out of room on grid.\u201d",
    ),
    "conditional statement": (
        "Conditional statements ('if-then')",
        "\u201c...using green below the red tiles and yellow below the blue tiles.\u201d",
    ),
    "object": ("Objects (composed of tiles, defined and referred to again)", "\u201cmake a blue dog bone shape\u201d"),
    "symmetry": (
        "Symmetry (functions: reflection, rotation)",
        "\u201cReflect the multi-colored triangle you made "
        "in the previous two steps symmetrically over the black diagonal.\u201d",
    ),
    "recursion": (
        "Recursion (growing patterns, spirals, self-similarity)",
        "\u201cForm an X by ... At each corner, ... form 4 smaller X shapes\u201d",
    ),
}
Mechanism = Literal[
    "bounded iteration", "conditional iteration", "conditional statement", "object", "symmetry", "recursion"
]
assert set(Mechanism.__args__) == set(MECHANISMS)


class StepLabel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    level: Annotated[int, Field(strict=True, ge=0, le=3)] | None = None
    mechanisms: Annotated[list[Mechanism], Field(max_length=len(MECHANISMS))] = []

    @field_validator("mechanisms")
    @classmethod
    def _in_order(cls, v: list[str]) -> list[str]:
        # Stored in the paper's order, once each, so equal labels compare equal.
        return [m for m in MECHANISMS if m in v]


def blank(n_steps: int) -> list[dict]:
    return [{"level": None, "mechanisms": []} for _ in range(n_steps)]


def majority(labels: list[dict]) -> dict | None:
    """The executors' majority label of one step: the level most of them gave (ties: none is
    taken) and the mechanisms more than half of them named; None when nobody labelled."""
    given = [lb for lb in labels if lb and (lb.get("level") is not None or lb.get("mechanisms"))]
    if not given:
        return None
    levels = Counter(lb["level"] for lb in given if lb.get("level") is not None)
    top = levels.most_common(2)
    level = top[0][0] if top and (len(top) == 1 or top[0][1] > top[1][1]) else None
    named = Counter(m for lb in given for m in set(lb.get("mechanisms") or []))
    return {"level": level, "mechanisms": [m for m in MECHANISMS if named[m] * 2 > len(given)]}
