"""Leaderboards: agents, each annotator, the per-item human majority and the kind's
baselines, overall and per category with 95% intervals, plus consistency and agreement.

People's rows, the per-item majority and the agreement come from running totals that
database triggers keep beside each annotation (app/leaderboards/models.py, docs/data-model.md):
a page never scans the annotations (DESIGN.md sections 7 and 9). Agents' rows read their
outputs (one per item). `recompute_from_annotations` is the same leaderboard counted from the
raw annotations, the reference the totals are tested against.
Accuracy is over the study's non-gold items: an item an agent did not answer counts as
wrong (coverage is shown beside it); an annotator is scored on the items they answered.

The unit of every interval here is the item: each row holds at most one answer per item (an
agent has one output per item and an annotator one annotation per item, both unique in the
schema; the majority row has one answer per item), so its Wilson interval over items needs no
cluster bootstrap, and a second annotator with the same answers changes no row's interval
(tests/integration/test_leaderboard.py). A table that pools several annotations of one item
must resample items instead (the navigation section's does: app/kinds/navigation/leaderboard.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import math
from collections import Counter

from sqlalchemy import Float, String, and_, case, cast, func, select, text
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.agents.models import Agent, AgentOutput
from app.auth.models import IMPORTED_PLATFORM, User
from app.leaderboards import ranking
from app.kinds import get_kind
from app.leaderboards import stats
from app.leaderboards.models import ItemAnswerTotal, ItemSummary, WorkerCategoryTotal, WorkerConsistencyTotal
from app.leaderboards.ranks import with_ranks
from app.leaderboards.rows import est as _est
from app.leaderboards.rows import item_totals as _item_totals
from app.leaderboards.rows import majority_dict as _majority_dict
from app.leaderboards.rows import majority_sums as _majority_sums
from app.leaderboards.totals import rebuild
from app.studies.models import Annotation, Item, Study


def _rows_from_scores(
    session: Session, study: Study, scored: Any, *, over_all_items: bool, totals: Any
) -> dict[Any, Any]:
    """`scored`: a subquery with columns (key, item_id, score, category, cluster).

    Consistency is counted in SQL: per key, the clusters seen whole and those all right.
    """
    per_cat = session.execute(
        select(scored.c.key, scored.c.category, func.count(), func.sum(scored.c.score)).group_by(
            scored.c.key, scored.c.category
        )
    ).all()
    per_cluster = (
        select(
            scored.c.key,
            scored.c.cluster,
            func.count().label("n"),
            func.sum(case((scored.c.score >= 1.0, 1), else_=0)).label("right"),
        )
        .where(scored.c.cluster != "")
        .group_by(scored.c.key, scored.c.cluster)
        .subquery()
    )
    return _assemble(per_cat, _consistency(session, study, per_cluster), totals, over_all_items=over_all_items)


def _consistency(session: Session, study: Study, per_cluster: Any) -> dict[Any, Any]:
    """`per_cluster`: (key, cluster, n, right) -> per key (clusters seen whole, all right)."""
    sizes = (
        select(Item.cluster, func.count().label("full"))
        .where(Item.study_id == study.id, Item.is_gold.is_(False), Item.cluster != "")
        .group_by(Item.cluster)
        .subquery()
    )
    whole = per_cluster.c.n == sizes.c.full
    return {
        k: (seen or 0, right or 0)
        for k, seen, right in session.execute(
            select(
                per_cluster.c.key,
                func.sum(case((whole, 1), else_=0)),
                func.sum(case((and_(whole, per_cluster.c.right == sizes.c.full), 1), else_=0)),
            )
            .join(sizes, sizes.c.cluster == per_cluster.c.cluster)
            .group_by(per_cluster.c.key)
        )
    }


def _assemble(per_cat: Any, cons: dict[Any, Any], totals: Any, *, over_all_items: bool) -> dict[Any, Any]:
    """Rows from (key, category, answers, score sum) and per key (clusters seen, all right)."""
    n_all, by_cat_total, cluster_sizes = totals
    n_clusters = sum(1 for name in cluster_sizes if name)
    out: dict[Any, Any] = {}
    for k, cat, n, s in per_cat:
        r = out.setdefault(k, {"answered": 0, "correct": 0.0, "by_category": {}})
        r["answered"] += n
        r["correct"] += s or 0
        denom = by_cat_total.get(cat, n) if over_all_items else n
        r["by_category"][cat] = _est(s or 0, denom)
    for k, r in out.items():
        denom = n_all if over_all_items else r["answered"]
        r["accuracy"] = _est(r["correct"], denom)
        r["coverage"] = r["answered"] / n_all if n_all else 0.0
        seen, right = cons.get(k, (0, 0))
        # Agents answer for every cluster (a missing answer is wrong); a person's cluster
        # counts once they have seen all of it.
        denom = n_clusters if over_all_items else seen
        r["consistency"] = _est(right, denom) if denom else None
    return out


def _tune(session: Session) -> None:
    """Aggregations over a million rows want hash tables in memory, not sorted spills, and
    gain nothing from JIT compilation; only for this transaction."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SET LOCAL work_mem = '64MB'"))
        session.execute(text("SET LOCAL jit = off"))


def compute(session: Session, study: Study, annotators: tuple[int, int] | None = None) -> dict[str, Any]:
    """The leaderboard from the running totals (app/leaderboards/models.py): people's rows,
    the per-item majority and the agreement never read `annotations`. The same figures as
    `recompute_from_annotations` (tests/integration/test_leaderboard_totals.py).

    `annotators` = (offset, limit): only that page of annotator rows, in the board's order
    (most answers first, then the worker id); None: all of them. `board["annotators"]` says
    how many there are in all and which page the rows are."""
    kind = get_kind(study.kind)
    _ensure_answer_field(session, study, kind)
    _tune(session)
    totals = _item_totals(session, study)
    rows = _agent_rows(session, study, totals)
    with_ranks(session, study, rows)

    # People: every annotator not rejected, on the items they answered.
    W = WorkerCategoryTotal
    mine = and_(W.study_id == study.id, W.n > 0)
    conn = session.connection()
    workers: Any
    if annotators is None:
        workers = select(W.worker_id).where(mine)
        cons_where = WorkerConsistencyTotal.study_id == study.id
    else:
        # The page's workers, ranked in SQL over the (annotator, category) totals; the
        # window counts them all before LIMIT cuts the page.
        offset, limit = annotators
        answered = func.sum(W.n)
        ranked = conn.execute(
            select(W.worker_id, func.count().over())
            .where(mine)
            .group_by(W.worker_id)
            .order_by(answered.desc(), W.worker_id)
            .offset(offset)
            .limit(limit)
        ).all()
        ids = [w for w, _ in ranked]
        total = ranked[0][1] if ranked else _count_annotators(conn, study)
        mine = and_(mine, W.worker_id.in_(ids))
        workers = ids
        cons_where = and_(WorkerConsistencyTotal.study_id == study.id, WorkerConsistencyTotal.worker_id.in_(ids))
    # Core rows (not ORM results): one per (annotator, category), tens of thousands.
    per_cat = conn.execute(select(W.worker_id, W.category, W.n, W.score_sum).where(mine)).all()
    cons = {
        w: (whole, right)
        for w, whole, right in conn.execute(
            select(
                WorkerConsistencyTotal.worker_id,
                WorkerConsistencyTotal.clusters_whole,
                WorkerConsistencyTotal.clusters_right,
            ).where(cons_where)
        )
    }
    humans = _assemble(per_cat, cons, totals, over_all_items=False)
    people = _annotator_rows(session, humans, workers)
    rows.extend(people)
    page = (
        {"total": len(people), "offset": 0, "limit": None}
        if annotators is None
        else {"total": total, "offset": offset, "limit": limit}
    )

    majority = _majority_from_totals(session, study, totals)
    board = _board(session, study, kind, totals, rows, page, majority, _agreement_from_totals(session, study))
    return {**board, **_dawid_skene(session, study, rows)}


def _dawid_skene(session: Session, study: Study, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The cached Dawid-Skene row, put after the majority row, and its status (a background
    job computes it: app/leaderboards/annotators.py)."""
    from app.leaderboards.annotators import board_entry

    return {"dawid_skene": board_entry(session, study, rows)}


def _count_annotators(conn: Any, study: Study) -> int:
    W = WorkerCategoryTotal
    return int(
        conn.execute(select(func.count(func.distinct(W.worker_id))).where(W.study_id == study.id, W.n > 0)).scalar_one()
    )


def _majority_from_totals(session: Session, study: Study, totals: Any) -> dict[str, Any] | None:
    """The majority row from each item's winning answer (most answers, then the earliest)
    in lb_item_answers. PostgreSQL keeps each item's winner in lb_items (migration 0013) and
    sums them in one statement, each category's scores added in item order (an ordered
    aggregate), as `_majority_row` adds them, so the figures are the same to the last bit;
    SQLite picks the winners in SQL per view and sums them here."""
    if session.get_bind().dialect.name == "postgresql":
        return _majority_postgresql(session, study, totals)
    top = (
        select(
            ItemAnswerTotal.item_id,
            ItemAnswerTotal.n,
            ItemAnswerTotal.score_sum,
            func.row_number()
            .over(partition_by=ItemAnswerTotal.item_id, order_by=(ItemAnswerTotal.n.desc(), ItemAnswerTotal.first_id))
            .label("rank"),
        )
        .where(ItemAnswerTotal.study_id == study.id, ItemAnswerTotal.n > 0)
        .subquery()
    )
    winners = (
        session.connection()
        .execute(
            select(top.c.item_id, top.c.n, top.c.score_sum, Item.category, Item.cluster)
            .join(Item, Item.id == top.c.item_id)
            .where(top.c.rank == 1, Item.is_gold.is_(False))
            .order_by(top.c.item_id)
        )
        .all()
    )
    if not winners:
        return None
    return _majority_sums(((cat, cluster, total / n) for _, n, total, cat, cluster in winners), totals)


MAJORITY_POSTGRESQL = text("""
WITH w AS MATERIALIZED (
  SELECT i.id AS item_id, i.category, i.cluster, t.score
  FROM items i LEFT JOIN lb_items t ON t.item_id = i.id
  WHERE i.study_id = :sid AND NOT i.is_gold),
c AS (SELECT count(*) AS size, count(score) AS n, sum(CASE WHEN score >= 1.0 THEN 1 ELSE 0 END) AS r
      FROM w WHERE cluster <> '' GROUP BY cluster)
SELECT category, min(item_id) AS first, count(*) AS n, sum(score ORDER BY item_id) AS total
FROM w WHERE score IS NOT NULL GROUP BY category
UNION ALL
SELECT NULL, NULL, count(*), sum(CASE WHEN r = n THEN 1 ELSE 0 END) FROM c WHERE n = size
""")


def _majority_postgresql(session: Session, study: Study, totals: Any) -> dict[str, Any] | None:
    rows = session.connection().execute(MAJORITY_POSTGRESQL, {"sid": study.id}).all()
    cats = sorted((r for r in rows if r.first is not None), key=lambda r: r.first)
    if not cats:
        return None
    seen, right = next(((r.n, int(r.total or 0)) for r in rows if r.first is None), (0, 0))
    # Categories in the order of their first item, as the per-item loop meets them.
    return _majority_dict({r.category: [r.n, r.total] for r in cats}, seen, right, totals)


def _agreement_from_totals(session: Session, study: Study) -> dict[str, Any]:
    """Alpha and kappa need, per item, its answers' counts; items with the same counts weigh
    the same, so SQL returns each pattern once with its number of items. A pattern is written
    as "count:length:value," per answer (length-prefixed: any value parses back)."""
    if session.get_bind().dialect.name == "postgresql":
        # Each item's pattern is kept in lb_items (migration 0013), written as below.
        return _agreement_of_patterns(
            {
                _parse_pattern(p): weight
                for p, weight in session.connection().execute(
                    select(ItemSummary.pattern, func.count())
                    .where(ItemSummary.study_id == study.id)
                    .group_by(ItemSummary.pattern)
                )
            }
        )
    # SQLite: grouped from the (item, answer) rows per view.
    t = ItemAnswerTotal
    part = cast(t.n, String) + ":" + cast(func.length(t.value), String) + ":" + t.value
    ordered = (
        select(t.item_id, part.label("part"))
        .where(t.study_id == study.id, t.n > 0)
        .order_by(t.item_id, t.value)
        .subquery()
    )
    per_item = (
        select(ordered.c.item_id, func.group_concat(ordered.c.part, ",").label("p"))
        .group_by(ordered.c.item_id)
        .subquery()
    )
    patterns = {}
    for p, weight in session.connection().execute(select(per_item.c.p, func.count()).group_by(per_item.c.p)):
        patterns[_parse_pattern(p)] = weight
    return _agreement_of_patterns(patterns)


def _parse_pattern(p: str) -> frozenset[Any]:
    out, i = [], 0
    while i < len(p):
        j = p.index(":", i)
        k = p.index(":", j + 1)
        n, length = int(p[i:j]), int(p[j + 1 : k])
        out.append((p[k + 1 : k + 1 + length], n))
        i = k + 2 + length  # past the value and its comma
    return frozenset(out)


def _ensure_answer_field(session: Session, study: Study, kind: Any) -> None:
    """The per-item answers are grouped by the kind's agreement field as the study records
    it; a study made without it (raw SQL) or whose kind changed its field is recounted once.
    The recount is committed at once in a transaction of its own (the study row locked, so two
    page views never recount together): a page view never commits, and holding the totals'
    row locks until the request ends would hold up every answer of the study."""
    field = kind.agreement_value()
    if study.answer_field == field:
        return
    with Session(bind=session.get_bind()) as own:
        locked = own.execute(select(Study).where(Study.id == study.id).with_for_update()).scalar_one()
        if locked.answer_field != field:  # not already recounted by a request that held the lock
            locked.answer_field = field
            own.flush()
            rebuild(own.connection(), study.id)
        own.commit()
    set_committed_value(study, "answer_field", field)


def _scored(key: Any, item_id: Any, score: Any, *where: Any) -> Any:
    """One score a row, who gave it (`key`), on which item, and the item's category and
    cluster: what _rows_from_scores counts, for agents' outputs and annotations alike."""
    return (
        select(
            key.label("key"),
            item_id,
            cast(func.coalesce(score, 0.0), Float).label("score"),
            Item.category,
            Item.cluster,
        )
        .join(Item, Item.id == item_id)
        .where(*where)
        .subquery()
    )


def _agent_rows(session: Session, study: Study, totals: Any) -> list[dict[str, Any]]:
    """Agents' own outputs (one row per item per agent: read directly)."""
    agent_scored = _scored(
        AgentOutput.agent_id,
        AgentOutput.item_id,
        AgentOutput.score,
        AgentOutput.study_id == study.id,
        Item.is_gold.is_(False),
    )
    agents = {
        a.id: a
        for a in session.scalars(
            select(Agent)
            .join(AgentOutput, AgentOutput.agent_id == Agent.id)
            .where(AgentOutput.study_id == study.id)
            .distinct()
        )
    }
    rows = []
    for aid, r in _rows_from_scores(session, study, agent_scored, over_all_items=True, totals=totals).items():
        a = agents[aid]
        rows.append({"type": "agent", "name": f"{a.name} v{a.version}", "agent_id": aid, **r})
    return rows


def _annotator_rows(session: Session, humans: dict[Any, Any], worker_ids: Any) -> list[dict[str, Any]]:
    # Annotators imported from an earlier study (app/studies/imports.py) are marked as such.
    names = {
        wid: f"{name} (imported)" if platform == IMPORTED_PLATFORM else name
        for wid, name, platform in session.execute(
            select(User.id, User.pseudonym, User.platform).where(User.id.in_(worker_ids))
        ).all()
    }
    # Most answers first; the worker id breaks ties, so the order never depends on the plan.
    return [
        {"type": "annotator", "name": names.get(wid, str(wid)), **r}
        for wid, r in sorted(humans.items(), key=lambda kv: (-kv[1]["answered"], kv[0]))
    ]


def _board(
    session: Session,
    study: Study,
    kind: Any,
    totals: Any,
    rows: list[dict[str, Any]],
    annotators: dict[str, Any],
    majority: dict[str, Any] | None,
    agreed: Any,
) -> dict[str, Any]:
    """The board around its agents' and annotators' rows, which the majority row (if any) and
    the kind's baselines follow: what `compute` (from the running totals) and
    recompute_from_annotations (from the raw annotations) both answer."""
    n_all, by_cat_total, _ = totals
    if majority:
        rows.append(majority)
    rows.extend(kind.baselines(session, study))
    return {
        "study": study.slug,
        "kind": study.kind,
        "items": n_all,
        "categories": sorted(by_cat_total),
        "category_label": kind.category_label,
        "rows": rows,
        "annotators": annotators,
        "agreement": agreed,
        "extra": ranking.section(session, study, kind),  # the kind's tables, then the settled one
    }


def recompute_from_annotations(session: Session, study: Study) -> dict[str, Any]:
    """The leaderboard counted from the raw annotations (what `compute` did before the
    running totals): the reference the totals are tested against, and bench/crowd.py's
    "before" figure. Scans the study's annotations; not for pages."""
    kind = get_kind(study.kind)
    _tune(session)
    totals = _item_totals(session, study)
    rows = _agent_rows(session, study, totals)
    with_ranks(session, study, rows)
    valid = and_(Annotation.study_id == study.id, Annotation.is_gold.is_(False), Annotation.excluded.is_(False))
    human_scored = _scored(Annotation.worker_id, Annotation.item_id, Annotation.score, valid)
    humans = _rows_from_scores(session, study, human_scored, over_all_items=False, totals=totals)
    people = _annotator_rows(session, humans, select(Annotation.worker_id).where(valid))
    rows.extend(people)
    per_item = _answers_per_item(session, study, kind, valid)
    page = {"total": len(people), "offset": 0, "limit": None}
    majority = _majority_row(session, study, per_item, totals)
    board = _board(session, study, kind, totals, rows, page, majority, agreement(per_item))
    return {**board, **_dawid_skene(session, study, rows)}


def _answers_per_item(session: Session, study: Study, kind: Any, valid: Any) -> dict[int, dict[Any, Any]]:
    """One pass over the annotations: per item, per answer value, (count, score sum, first
    annotation id). The majority and the agreement statistics both come from it."""
    field = kind.agreement_value()
    # Kinds without a categorical answer vote on correctness itself.
    value = Annotation.response[field].as_string() if field else cast(func.coalesce(Annotation.score, 0.0), Float)
    per_item: dict[int, dict[Any, Any]] = {}
    # Core rows (not ORM results): this returns one row per item and answer.
    for item_id, v, n, total, first in session.connection().execute(
        select(
            Annotation.item_id,
            value,
            func.count(),
            func.sum(func.coalesce(Annotation.score, 0.0)),
            func.min(Annotation.id),
        )
        .where(valid)
        .group_by(Annotation.item_id, value)
    ):
        per_item.setdefault(item_id, {})[v] = (n, float(total or 0.0), first)
    return per_item


def _majority_row(
    session: Session, study: Study, per_item: dict[int, dict[Any, Any]], totals: Any
) -> dict[str, Any] | None:
    """The per-item majority answer of people, scored; a tie goes to the earliest answer
    (deterministic: no randomness in a reported number)."""
    if not per_item:
        return None
    where = {
        i: (cat, cluster)
        for i, cat, cluster in session.connection().execute(
            select(Item.id, Item.category, Item.cluster).where(Item.study_id == study.id, Item.is_gold.is_(False))
        )
    }

    def winners() -> Iterator[tuple[Any, Any, float]]:
        # In item order: the float sums then never depend on the order rows came in.
        for item_id, values in sorted(per_item.items()):
            top = max(n for n, _, _ in values.values())
            n, total, _ = min((v for v in values.values() if v[0] == top), key=lambda v: v[2])
            yield (*where[item_id], total / n)

    return _majority_sums(winners(), totals)


def agreement(per_item: dict[int, dict[Any, Any]]) -> dict[str, Any]:
    """Krippendorff's alpha and Fleiss' kappa over the items' answer counts."""
    # Items with the same answer counts weigh the same: pass each pattern once, weighted.
    return _agreement_of_patterns(
        Counter(frozenset((v, n) for v, (n, _, _) in values.items()) for values in per_item.values())
    )


def _agreement_of_patterns(patterns: dict[Any, Any]) -> dict[str, Any]:
    if not patterns:
        return {}
    dicts, weights = [dict(p) for p in patterns], list(patterns.values())
    alpha = stats.krippendorff_alpha_nominal(dicts, weights)
    kappa, used = stats.fleiss_kappa(dicts, weights=weights)

    def clean(x: Any) -> Any:
        return None if x is None or (isinstance(x, float) and math.isnan(x)) else x

    return {
        "krippendorff_alpha": clean(alpha),
        "fleiss_kappa": clean(kappa),
        "fleiss_items": used,
        "items_with_2plus": sum(w for d, w in zip(dicts, weights) if sum(d.values()) >= 2),
    }
