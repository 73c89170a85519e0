"""Rebuilding the leaderboard totals (app/leaderboards/models.py) from the annotations.

The triggers of migration 0011 keep the totals as annotations are written; this recomputes
them for one study (or all) with the same definitions, for what bypasses triggers: a bulk load
with `session_replication_role = replica` (bench/crowd.py's seed), a study whose kind changed
its agreement field (app.leaderboards.service.compute notices), a repair. One statement per
table, a scan of the study's annotations: seconds at a million.

On PostgreSQL an item's `lb_items` row is its lock (migration 0014): every writer of the
item's totals takes it before anything else of the item, and a transaction writing many
annotations takes all of them first, in item order (`lock_totals`), so that two such
transactions sharing items, or one and the crowd's answers, wait for each other instead of
deadlocking.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import text
from sqlalchemy.engine import Connection

# Each worker table and the column after (study, worker) that keys its rows.
WORKER_TABLES = (
    ("lb_worker_categories", "category"),
    ("lb_worker_clusters", "cluster"),
    ("lb_worker_consistency", "worker_id"),
)
TABLES = tuple(t for t, _ in WORKER_TABLES) + ("lb_item_answers",)


def value_sql(dialect: str, a: str) -> str:
    """The answer value of annotation row `a`, as the triggers compute it."""
    field = f"(SELECT answer_field FROM studies WHERE id = {a}.study_id)"
    if dialect == "postgresql":
        score = f"(coalesce({a}.score, 0.0)::double precision)::text"
        answer = f"({a}.response ->> {field})"
    else:
        # 17 significant digits ("!": SQLite's printf stops at 16 otherwise) tell every two
        # doubles apart; PostgreSQL's float text is already the shortest exact one.
        score = f"printf('%!.17g', coalesce({a}.score, 0.0))"
        answer = f"json_extract({a}.response, '$.\"' || {field} || '\"')"
    return f"coalesce('=' || CASE WHEN {field} IS NULL THEN {score} ELSE {answer} END, '')"


def lock_totals(conn: Connection, study_id: int, items: Iterable[int] = (), workers: Iterable[int] = ()) -> None:
    """PostgreSQL: before a transaction writes many annotations, take the totals' locks it
    will need in the one global order: the items' lb_items rows in item order, then the
    workers' rows table by table in key order (the triggers take an item's row, then its
    worker's, then its answers'). `items`: the items whose answers change or get new ones
    (each must end with an answer, or the caller deletes its placeholder: rebuild does);
    `workers`: those whose existing annotations change (new workers have no rows to fight
    over). A no-op on SQLite, which has one writer at a time."""
    if conn.dialect.name != "postgresql":
        return
    ids = sorted(set(items))
    if ids:
        conn.execute(text("SELECT lb_lock_items(CAST(:ids AS integer[]))"), {"ids": ids})
    ws = sorted(set(workers))
    if ws:
        for table, key in WORKER_TABLES:
            conn.execute(
                text(
                    f"SELECT 1 FROM {table} WHERE study_id = :s AND worker_id = ANY(:w) "
                    f"ORDER BY worker_id, {key} FOR UPDATE"
                ),
                {"s": study_id, "w": ws},
            )


def rebuild(conn: Connection, study_id: int | None = None) -> None:
    """Replace the totals of one study (or every study) by a recount of its annotations."""
    dialect = conn.dialect.name
    where = "NOT a.is_gold AND NOT a.excluded" + ("" if study_id is None else " AND a.study_id = :sid")
    params = {} if study_id is None else {"sid": study_id}
    if dialect == "postgresql":
        # Every item's lock first (items without answers get a placeholder, deleted below):
        # the deletes below would otherwise meet the crowd's answers in another order.
        conn.execute(
            text(
                "SELECT lb_lock_items(array(SELECT id FROM items WHERE NOT is_gold"
                + ("" if study_id is None else " AND study_id = :sid")
                + "))"
            ),
            params,
        )
    for table in TABLES:
        conn.execute(text(f"DELETE FROM {table}" + ("" if study_id is None else " WHERE study_id = :sid")), params)
    conn.execute(
        text(
            "INSERT INTO lb_worker_categories (study_id, worker_id, category, n, score_sum) "
            "SELECT a.study_id, a.worker_id, i.category, count(*), sum(coalesce(a.score, 0.0)) "
            f"FROM annotations a JOIN items i ON i.id = a.item_id WHERE {where} "
            "GROUP BY a.study_id, a.worker_id, i.category"
        ),
        params,
    )
    conn.execute(
        text(
            "INSERT INTO lb_worker_clusters (study_id, worker_id, cluster, n, n_right) "
            "SELECT a.study_id, a.worker_id, i.cluster, count(*), "
            "sum(CASE WHEN coalesce(a.score, 0.0) >= 1.0 THEN 1 ELSE 0 END) "
            f"FROM annotations a JOIN items i ON i.id = a.item_id WHERE {where} AND i.cluster <> '' "
            "GROUP BY a.study_id, a.worker_id, i.cluster"
        ),
        params,
    )
    conn.execute(
        text(
            "INSERT INTO lb_worker_consistency (study_id, worker_id, clusters_whole, clusters_right) "
            "SELECT c.study_id, c.worker_id, sum(CASE WHEN c.n = z.size THEN 1 ELSE 0 END), "
            "sum(CASE WHEN c.n = z.size AND c.n_right = z.size THEN 1 ELSE 0 END) "
            "FROM lb_worker_clusters c JOIN (SELECT study_id, cluster, count(*) AS size FROM items "
            "WHERE NOT is_gold GROUP BY study_id, cluster) z ON z.study_id = c.study_id AND z.cluster = c.cluster "
            + ("" if study_id is None else "WHERE c.study_id = :sid AND z.study_id = :sid ")
            + "GROUP BY c.study_id, c.worker_id"
        ),
        params,
    )
    conn.execute(
        text(
            "INSERT INTO lb_item_answers (item_id, value, study_id, n, score_sum, first_id) "
            "SELECT v.item_id, v.value, min(v.study_id), count(*), sum(v.score), min(v.id) FROM "
            f"(SELECT a.item_id, a.study_id, a.id, coalesce(a.score, 0.0) AS score, "
            f"{value_sql(dialect, 'a')} AS value FROM annotations a WHERE {where}) v "
            "GROUP BY v.item_id, v.value"
        ),
        params,
    )
    if dialect == "postgresql":
        conn.execute(
            text("DELETE FROM lb_items WHERE pattern = ''" + ("" if study_id is None else " AND study_id = :sid")),
            params,
        )
