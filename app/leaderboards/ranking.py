"""What a kind ranks its agents by, read one way for every kind (issue 29): the settled table
("A above B, settled after n judgements", app/leaderboards/settled.py) and adaptive allocation
(app/leaderboards/adaptive.py) both read the arrivals built here from the kind's `Ranking`
declaration (TaskKind.ranking_for), so that no kind builds its own and the core names none.

An agent is the `category` of its items unless the kind names a key of the item's payload or
reference (STS: the reference's "agent"; A3DS: the reference's "captioner"); a unit is the item's
cluster (the thing every agent is judged on: a path, a scenario, a picture pair), the item
itself without one; a value in [0, 1] is taken from each valid, non-gold answer by the kind's
rule (`value_of`: the annotation's score unless the kind says otherwise).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.leaderboards.sequential import Arrival
from app.leaderboards.settled import settled_table

if TYPE_CHECKING:  # the ORM is imported where a query runs: a kind's package, which
    # imports this module, is imported by the sandboxed process too (workers/sandbox.py)
    from sqlalchemy.orm import Session

__all__ = ["Ranking", "agent_of", "arrivals", "item_agents", "settled_section", "section"]

JSON = dict[str, Any]


def _score(response: JSON, scores: JSON, score: float | None) -> float | None:
    return score


@dataclass(frozen=True)
class Ranking:
    """A kind's declaration of what ranks its agents by people's judgements.

    unit, measure, agent: the words the settled table uses ("path", "SR", "speaker");
    value: the kind's rule, in words, for the answer that gives an agent its value on a unit,
    its first valid one there ("1 when the listener picked the target, 0 otherwise.");
    agent_key: ("payload" or "reference", key) naming the item's agent, None for its category;
    value_of: (response, scores, score) -> value in [0, 1] or None (not counted), the score by
    default."""

    unit: str
    measure: str
    agent: str
    value: str
    agent_key: tuple[str, str] | None = None
    value_of: Callable[[JSON, JSON, float | None], float | None] = _score


def agent_of(ranking: Ranking, category: str, payload: JSON | None, reference: JSON | None) -> str | None:
    """The item's agent under `ranking` (None: the item is no agent's output)."""
    if ranking.agent_key is None:
        return category or None
    where, key = ranking.agent_key
    found = ((payload if where == "payload" else reference) or {}).get(key)
    return None if found in (None, "") else str(found)


def item_agents(session: Session, study: Any, ranking: Ranking) -> dict[int, str | None]:
    """Each non-gold item's agent (item id -> agent name, None for no agent's)."""
    from sqlalchemy import select

    from app.studies.models import Item

    where = Item.study_id == study.id, Item.is_gold.is_(False)
    if ranking.agent_key is None:
        return {
            i: agent_of(ranking, c, None, None)
            for i, c in session.execute(select(Item.id, Item.category).where(*where))
        }
    blob = Item.payload if ranking.agent_key[0] == "payload" else Item.reference
    return {
        i: agent_of(ranking, c, b, b) for i, c, b in session.execute(select(Item.id, Item.category, blob).where(*where))
    }


def arrivals(session: Session, study: Any, ranking: Ranking) -> dict[str, list[Arrival]]:
    """Per agent, (arrival, unit, value) for each valid, non-gold answer in the order it
    arrived (arrival: the annotation's created time, then its id). A unit's first value per
    agent is the one the confidence sequences count (sequential.settle)."""
    from sqlalchemy import and_, select

    from app.studies.models import Annotation, Item

    agents = item_agents(session, study, ranking)
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    out: dict[str, list[Arrival]] = defaultdict(list)
    query = (
        select(
            Annotation.id,
            Annotation.created_at,
            Annotation.item_id,
            Item.cluster,
            Annotation.response,
            Annotation.scores,
            Annotation.score,
        )
        .join(Item, Item.id == Annotation.item_id)
        .where(valid)
        .order_by(Annotation.created_at, Annotation.id)
    )
    for ann_id, created, item_id, cluster, response, scores, score in session.connection().execute(query):
        agent = agents.get(item_id)
        if agent is None:
            continue
        value = ranking.value_of(response or {}, scores or {}, score)
        if value is None:
            continue
        try:
            x = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(x) and 0.0 <= x <= 1.0:
            out[agent].append(((created, ann_id), cluster if cluster else f"item {item_id}", x))
    return dict(out)


def settled_section(session: Session, study: Any, kind: Any) -> JSON | None:
    """The settled table of a study whose kind ranks agents (TaskKind.ranking_for), with two
    agents or more; None otherwise."""
    ranking = kind.ranking_for(study.kind_settings)
    if ranking is None:
        return None
    names = sorted({a for a in item_agents(session, study, ranking).values() if a is not None})
    if len(names) < 2:
        return None
    got = kind.ranking_arrivals(session, study) or {}
    return settled_table(
        f"{study.kind}_settled",
        {a: got.get(a, []) for a in names},
        unit=ranking.unit,
        measure=ranking.measure,
        agent=ranking.agent,
        value=ranking.value,
    )


def section(session: Session, study: Any, kind: Any) -> JSON | None:
    """The kind's own leaderboard section (TaskKind.extra_leaderboard) with the settled table
    after its tables, for every kind that ranks agents."""
    extra: Mapping[str, Any] | None = kind.extra_leaderboard(session, study)
    settled = settled_section(session, study, kind)
    if settled is None:
        return dict(extra) if extra is not None else None
    out = dict(extra or {})
    out["tables"] = [*(out.get("tables") or []), settled]
    return out
