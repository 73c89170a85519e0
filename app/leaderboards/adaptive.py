"""Adaptive allocation (issue 29, "Adapt"): people's next judgements go to the agents whose
place in the ranking is still open, so that a study settles its ranking (the settled
comparisons, app/leaderboards/settled.py) with fewer judgements than spreading them evenly.

How it works: a periodic job (`refresh`, run every minute with the job sweeper: the in-process
worker's loop and Celery beat's sweep task, app/jobs.py and workers/tasks.py) reads the kind's
per-agent arrivals (TaskKind.ranking_arrivals, built from the kind's Ranking by
app/leaderboards/ranking.py: each unit's first value per agent, in arrival order), settles every pair of agents by their confidence sequences (sequential.settle) and
writes each item's priority (Item.priority):

    priority = 1 + u   for the items of an agent in at least one open pair,
    priority = u       for the items of an agent whose every comparison is settled,

where u in [0, 1) is the item's unit's fixed random order: the smallest `position` among the
items of its cluster (its own position without one), so that the open agents' items of one
unit (navigation: one path) come one after another and each pair gains shared units as fast as
its agents gain items. The engine's pick and the hot path's lease (app/studies/assignment.py,
hotpath.NEXT_SQL) then order a study's free items by

    n_active < floor first (every item gets `adaptive_floor` annotations before any gets more),
    then priority, then the plain order (most annotated first, then position).

No model is fitted per request: a lease reads the column in its one statement.

Why the estimates stay valid (docs/statistics.md, "Adaptive allocation"): the job chooses only
which agent's items come next, never which of an agent's items, nor which judgements count.
Within an agent, items come in the fixed random order of their units, which does not depend on
any value; each agent's values (and each pair's shared units) therefore arrive in an order set
before the study began, and adaptive allocation only decides when the next one arrives. A
confidence sequence holds at every n at once, so it holds at whatever n a data-dependent
schedule reaches; the verdicts keep their level. A study run to its end has every item annotated
as often as without it (the same annotations, in another order).

Rows change only when an agent's level changes, a few hundred a transaction: an item whose row
the job is writing is skipped by a lease for those milliseconds (SKIP LOCKED), as an item another
worker is being given is.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.leaderboards import sequential
from app.leaderboards.ranking import item_agents
from app.leaderboards.sequential import Arrival
from app.leaderboards.settled import DELTA
from app.studies.models import Item, Study

__all__ = ["BATCH", "open_agents", "item_priority", "unit_orders", "refresh_study", "refresh"]

log = logging.getLogger(__name__)

#: Items written a transaction. Small: a lease skips the rows a batch holds (SKIP LOCKED), and
#: a worker whose open items were all in one batch would be told their task is over. Written in
#: id order, the engine's order for locking several items.
BATCH = 25
#: Where the job looks: studies taking or about to take work.
STATES = ("live", "paused")


def open_agents(
    arrivals: Mapping[str, Sequence[Arrival]],
    agents: Iterable[str] = (),
    delta: float = DELTA,
    alpha: float = sequential.ALPHA,
    *,
    step_down: bool = True,
) -> set[str]:
    """The agents in at least one open comparison (sequential.settle at `delta`, `alpha`):
    those whose place in the ranking is not yet settled. `agents`: those with no judgement
    yet (every comparison of theirs is open). `step_down`: as sequential.settle."""
    names = list(dict.fromkeys([*arrivals, *agents]))
    if len(names) < 2:
        return set()
    result = sequential.settle({a: arrivals.get(a, []) for a in names}, delta, alpha, step_down=step_down)
    out: set[str] = set()
    for pair in result["pairs"]:
        if pair["verdict"] == sequential.OPEN:
            out.update((pair["first"], pair["second"]))
    return out


def item_priority(is_open: bool, unit_order: float) -> float:
    """1 + unit_order for an open agent's item, unit_order for a settled one's (unit_order in
    [0, 1): its unit's fixed random order)."""
    if not 0.0 <= unit_order < 1.0:
        raise ValueError(f"a unit's order lies in [0, 1), got {unit_order!r}")
    return (1.0 if is_open else 0.0) + unit_order


def unit_orders(items: Iterable[tuple[int, str, float]]) -> dict[int, float]:
    """Per item (id, cluster, position): its unit's order, the smallest position among the
    items of its cluster (its own position where it has none)."""
    rows = list(items)
    first: dict[str, float] = {}
    for _, cluster, position in rows:
        if cluster:
            first[cluster] = min(first.get(cluster, position), position)
    return {i: first[c] if c else p for i, c, p in rows}


def refresh_study(session: Session, study: Study) -> dict[str, Any]:
    """Write the study's items' priorities from its current arrivals (committing every BATCH
    rows); what it found: {"open": agents, "settled": agents, "changed": rows written}.
    Nothing for a kind that ranks no agents (TaskKind.ranking_arrivals is None)."""
    from app.kinds import get_kind

    kind = get_kind(study.kind)
    own = kind.item_priorities(session, study)
    if own is not None:  # a kind's own rule (a pairwise study's: TaskKind.item_priorities)
        current = session.execute(
            select(Item.id, Item.priority).where(Item.study_id == study.id, Item.is_gold.is_(False))
        ).all()
        written = _write(
            session, [{"id": i, "priority": own[i]} for i, p in sorted(current) if i in own and own[i] != p]
        )
        return {"open": [], "settled": [], "changed": written}
    ranking = kind.ranking_for(study.kind_settings)
    arrivals = kind.ranking_arrivals(session, study)
    if ranking is None or arrivals is None:
        return {"open": [], "settled": [], "changed": 0}
    owner = item_agents(session, study, ranking)  # item -> its agent (the kind's Ranking)
    rows = session.execute(
        select(Item.id, Item.cluster, Item.position, Item.priority).where(
            Item.study_id == study.id, Item.is_gold.is_(False)
        )
    ).all()
    agents = sorted({a for a in owner.values() if a is not None} | set(arrivals))
    opened = open_agents(arrivals, agents)
    orders = unit_orders((r.id, r.cluster, r.position) for r in rows)
    changed = [
        {"id": r.id, "priority": p}
        for r in sorted(rows, key=lambda r: r.id)
        if (p := item_priority(owner.get(r.id) in opened, orders[r.id])) != r.priority
    ]
    _write(session, changed)
    return {"open": sorted(opened), "settled": sorted(set(agents) - opened), "changed": len(changed)}


def _write(session: Session, changed: list[dict[str, Any]]) -> int:
    """Write the priorities (rows in id order), committing every BATCH rows."""
    for start in range(0, len(changed), BATCH):
        session.execute(update(Item), changed[start : start + BATCH])
        session.commit()
    return len(changed)


def refresh() -> list[int]:
    """Refresh the priorities of every study with adaptive allocation on that is live or
    paused, and pause each live study whose marked comparisons are all settled (auto-pause,
    app/leaderboards/stopping.py); the ids of the studies refreshed. Run with the job sweeper
    (every minute), never by a request; a study that fails is logged and the others go on."""
    from app.db import get_sessionmaker
    from app.leaderboards import stopping

    done = []
    with get_sessionmaker()() as s:
        ids = s.scalars(
            select(Study.id)
            .where((Study.adaptive.is_(True) & Study.state.in_(STATES)) | (Study.state == "live"))
            .order_by(Study.id)
        ).all()
        for study_id in ids:
            study = s.get(Study, study_id)
            if study is None or not (study.adaptive or study.auto_pause):
                continue
            try:
                if study.adaptive:
                    refresh_study(s, study)
                stopping.check(s, study)
                s.commit()
            except Exception:
                s.rollback()
                log.exception("adaptive priorities or auto-pause of study %s", study_id)
                continue
            done.append(study_id)
    return done
