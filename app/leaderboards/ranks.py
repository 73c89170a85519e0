"""Agents' ranks on the generic table, as far as the items can tell them apart (DESIGN.md
section 7: rank intervals, tied groups shown as ties).

An agent is scored over every non-gold item (an item it did not answer scores 0, as its
accuracy counts it). The unit resampled is the item's cluster where the kind has clusters (a
proposition's questions share it: Common-ToM), else the item: each system's score per unit is
its total over the unit's items, so ranking the resampled totals ranks the resampled means over
items (every system has the same items in every resample).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.agents.models import AgentOutput
from app.leaderboards.rows import rank_cells
from app.studies.models import Item, Study


def agent_rank_labels(session: Session, study: Study, rows: list[dict[str, Any]]) -> dict[int, str | dict[str, str]]:
    """agent id -> its 95% rank interval as a label ("1", "2-3"), or under
    stats.MIN_RANK_UNITS units {"text": "—", "reason": why} (rows.rank_cells, the rule every
    kind's table follows); {} for fewer than two agents."""
    ids = [r["agent_id"] for r in rows if r.get("type") == "agent"]
    if len(ids) < 2:
        return {}
    unit_of = {
        item_id: cluster or f"item:{item_id}"
        for item_id, cluster in session.execute(
            select(Item.id, Item.cluster).where(Item.study_id == study.id, Item.is_gold.is_(False))
        )
    }
    units = sorted(set(unit_of.values()))
    index = {u: i for i, u in enumerate(units)}
    totals: dict[int, list[float]] = {a: [0.0] * len(units) for a in ids}
    for agent_id, item_id, score in session.execute(
        select(AgentOutput.agent_id, AgentOutput.item_id, AgentOutput.score).where(
            AgentOutput.study_id == study.id, AgentOutput.agent_id.in_(ids)
        )
    ):
        if item_id in unit_of and score is not None:
            totals[agent_id][index[unit_of[item_id]]] += float(score)
    unit = "cluster" if any(not u.startswith("item:") for u in units) else "item"
    cells = rank_cells({str(a): v for a, v in totals.items()}, unit)
    return {a: cells[str(a)] for a in ids}


def with_ranks(session: Session, study: Study, rows: list[dict[str, Any]]) -> None:
    """Give each agent row its "rank" label (in place); other rows get none."""
    labels = agent_rank_labels(session, study, rows)
    for r in rows:
        if r.get("type") == "agent" and r.get("agent_id") in labels:
            r["rank"] = labels[r["agent_id"]]
