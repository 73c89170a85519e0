"""Leaderboards: agents, each annotator, the per-item human majority and the kind's
baselines, overall and per category with 95% intervals, plus consistency and agreement.

Everything is counted in SQL; Python only sees per-group sums (DESIGN.md section 7).
Accuracy is over the study's non-gold items: an item an agent did not answer counts as
wrong (coverage is shown beside it); an annotator is scored on the items they answered.
"""

from __future__ import annotations

import math

from sqlalchemy import Float, and_, case, cast, func, literal, select
from sqlalchemy.orm import Session

from app.agents.models import Agent, AgentOutput
from app.auth.models import User
from app.kinds import get_kind
from app.leaderboards import stats
from app.studies.models import Annotation, Item, Study


def _est(k: float, n: int) -> dict:
    return stats.proportion(int(round(k)), n).as_dict()


def _item_totals(session: Session, study: Study) -> tuple[int, dict[str, int], dict[str, int]]:
    rows = session.execute(select(Item.category, func.count()).where(
        Item.study_id == study.id, Item.is_gold.is_(False)).group_by(Item.category)).all()
    by_cat = {c: n for c, n in rows}
    clusters = dict(session.execute(select(Item.cluster, func.count()).where(
        Item.study_id == study.id, Item.is_gold.is_(False)).group_by(Item.cluster)).all())
    return sum(by_cat.values()), by_cat, clusters


def _rows_from_scores(session: Session, study: Study, scored, key, *, over_all_items: bool,
                      totals, cluster_sizes) -> dict:
    """`scored`: a subquery with columns (key, item_id, score, category, cluster)."""
    n_all, by_cat_total, _ = totals
    per_cat = session.execute(
        select(scored.c.key, scored.c.category, func.count(), func.sum(scored.c.score))
        .group_by(scored.c.key, scored.c.category)).all()
    per_cluster = (
        select(scored.c.key, scored.c.cluster, func.count().label("n"),
               func.sum(case((scored.c.score >= 1.0, 1), else_=0)).label("right"))
        .group_by(scored.c.key, scored.c.cluster).subquery())
    cons = session.execute(select(per_cluster.c.key, per_cluster.c.cluster, per_cluster.c.n,
                                  per_cluster.c.right)).all()
    out: dict = {}
    for k, cat, n, s in per_cat:
        r = out.setdefault(k, {"answered": 0, "correct": 0.0, "by_category": {}})
        r["answered"] += n
        r["correct"] += s or 0
        denom = by_cat_total.get(cat, n) if over_all_items else n
        r["by_category"][cat] = _est(s or 0, denom)
    cons_count: dict = {}
    for k, cluster, n, right in cons:
        full = cluster_sizes.get(cluster, 0)
        if not cluster:
            continue
        c = cons_count.setdefault(k, [0, 0])
        if over_all_items or n == full:  # an annotator's cluster counts once all of it is seen
            c[1] += 1
            c[0] += 1 if (n == full and right == full) else 0
    for k, r in out.items():
        denom = n_all if over_all_items else r["answered"]
        r["accuracy"] = _est(r["correct"], denom)
        r["coverage"] = r["answered"] / n_all if n_all else 0.0
        c = cons_count.get(k)
        if over_all_items:
            c = [c[0] if c else 0, sum(1 for name in cluster_sizes if name)]
        r["consistency"] = _est(c[0], c[1]) if c and c[1] else None
    return out


def compute(session: Session, study: Study) -> dict:
    kind = get_kind(study.kind)
    totals = _item_totals(session, study)
    n_all, by_cat_total, cluster_sizes = totals
    rows: list[dict] = []

    # Agents' own outputs.
    agent_scored = (
        select(AgentOutput.agent_id.label("key"), AgentOutput.item_id,
               cast(func.coalesce(AgentOutput.score, 0.0), Float).label("score"),
               Item.category, Item.cluster)
        .join(Item, Item.id == AgentOutput.item_id)
        .where(AgentOutput.study_id == study.id, Item.is_gold.is_(False)).subquery())
    agents = {a.id: a for a in session.scalars(select(Agent).join(
        AgentOutput, AgentOutput.agent_id == Agent.id).where(AgentOutput.study_id == study.id).distinct())}
    for aid, r in _rows_from_scores(session, study, agent_scored, "key", over_all_items=True,
                                    totals=totals, cluster_sizes=cluster_sizes).items():
        a = agents[aid]
        rows.append({"type": "agent", "name": f"{a.name} v{a.version}", "agent_id": aid, **r})

    # People: every annotator not rejected, on the items they answered.
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False),
                 Annotation.excluded.is_(False))
    human_scored = (
        select(Annotation.worker_id.label("key"), Annotation.item_id,
               cast(func.coalesce(Annotation.score, 0.0), Float).label("score"),
               Item.category, Item.cluster)
        .join(Item, Item.id == Annotation.item_id).where(valid).subquery())
    names = dict(session.execute(select(User.id, User.pseudonym).where(User.id.in_(
        select(Annotation.worker_id).where(valid)))).all())
    humans = _rows_from_scores(session, study, human_scored, "key", over_all_items=False,
                               totals=totals, cluster_sizes=cluster_sizes)
    for wid, r in sorted(humans.items(), key=lambda kv: -kv[1]["answered"]):
        rows.append({"type": "annotator", "name": names.get(wid, str(wid)), **r})

    # The per-item majority of people; a tie goes to the earliest answer (deterministic).
    per_item = (select(Annotation.item_id, func.count().label("n"),
                       func.sum(Annotation.score).label("s"), func.min(Annotation.id).label("first"))
                .where(valid).group_by(Annotation.item_id).subquery())
    first = Annotation.__table__.alias("first_answer")
    majority = (
        select(literal(0).label("key"), per_item.c.item_id,
               case((2 * per_item.c.s > per_item.c.n, 1.0), (2 * per_item.c.s < per_item.c.n, 0.0),
                    else_=first.c.score).label("score"),
               Item.category, Item.cluster)
        .join(Item, Item.id == per_item.c.item_id)
        .join(first, first.c.id == per_item.c.first).subquery())
    maj = _rows_from_scores(session, study, majority, "key", over_all_items=False,
                            totals=totals, cluster_sizes=cluster_sizes)
    if maj:
        rows.append({"type": "majority", "name": "Human majority (per item)", **maj[0]})

    rows.extend(kind.baselines(session, study))

    return {"study": study.slug, "kind": study.kind, "items": n_all,
            "categories": sorted(by_cat_total), "category_label": kind.category_label,
            "rows": rows, "agreement": agreement(session, study, kind)}


def agreement(session: Session, study: Study, kind) -> dict:
    field = kind.agreement_value()
    if field is None:
        return {}
    value = Annotation.response[field].as_string()
    counts: dict[int, dict] = {}
    for item_id, v, n in session.execute(
            select(Annotation.item_id, value, func.count())
            .where(Annotation.study_id == study.id, Annotation.is_gold.is_(False),
                   Annotation.excluded.is_(False))
            .group_by(Annotation.item_id, value)):
        counts.setdefault(item_id, {})[v] = n
    alpha = stats.krippendorff_alpha_nominal(counts.values())
    kappa, used = stats.fleiss_kappa(counts.values())
    clean = lambda x: None if x is None or (isinstance(x, float) and math.isnan(x)) else x  # noqa: E731
    return {"krippendorff_alpha": clean(alpha), "fleiss_kappa": clean(kappa),
            "fleiss_items": used, "items_with_2plus": sum(1 for c in counts.values() if sum(c.values()) >= 2)}
