"""Rebuilding the leaderboard totals (app/leaderboards/models.py) from the annotations.

The triggers of migration 0011 keep the totals as annotations are written; this recomputes
them for one study (or all) with the same definitions, for what bypasses triggers: a bulk load
with `session_replication_role = replica` (bench/crowd.py's seed), a study whose kind changed
its agreement field (app.leaderboards.service.compute notices), a repair. One statement per
table, a scan of the study's annotations: seconds at a million.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Connection

TABLES = ("lb_worker_categories", "lb_worker_clusters", "lb_worker_consistency", "lb_item_answers")


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


def rebuild(conn: Connection, study_id: int | None = None) -> None:
    """Replace the totals of one study (or every study) by a recount of its annotations."""
    dialect = conn.dialect.name
    where = "NOT a.is_gold AND NOT a.excluded" + ("" if study_id is None else " AND a.study_id = :sid")
    params = {} if study_id is None else {"sid": study_id}
    for table in TABLES:
        conn.execute(text(f"DELETE FROM {table}" + ("" if study_id is None else " WHERE study_id = :sid")),
                     params)
    conn.execute(text(
        "INSERT INTO lb_worker_categories (study_id, worker_id, category, n, score_sum) "
        "SELECT a.study_id, a.worker_id, i.category, count(*), sum(coalesce(a.score, 0.0)) "
        f"FROM annotations a JOIN items i ON i.id = a.item_id WHERE {where} "
        "GROUP BY a.study_id, a.worker_id, i.category"), params)
    conn.execute(text(
        "INSERT INTO lb_worker_clusters (study_id, worker_id, cluster, n, n_right) "
        "SELECT a.study_id, a.worker_id, i.cluster, count(*), "
        "sum(CASE WHEN coalesce(a.score, 0.0) >= 1.0 THEN 1 ELSE 0 END) "
        f"FROM annotations a JOIN items i ON i.id = a.item_id WHERE {where} AND i.cluster <> '' "
        "GROUP BY a.study_id, a.worker_id, i.cluster"), params)
    conn.execute(text(
        "INSERT INTO lb_worker_consistency (study_id, worker_id, clusters_whole, clusters_right) "
        "SELECT c.study_id, c.worker_id, sum(CASE WHEN c.n = z.size THEN 1 ELSE 0 END), "
        "sum(CASE WHEN c.n = z.size AND c.n_right = z.size THEN 1 ELSE 0 END) "
        "FROM lb_worker_clusters c JOIN (SELECT study_id, cluster, count(*) AS size FROM items "
        "WHERE NOT is_gold GROUP BY study_id, cluster) z ON z.study_id = c.study_id AND z.cluster = c.cluster "
        + ("" if study_id is None else "WHERE c.study_id = :sid AND z.study_id = :sid ")
        + "GROUP BY c.study_id, c.worker_id"), params)
    conn.execute(text(
        "INSERT INTO lb_item_answers (item_id, value, study_id, n, score_sum, first_id) "
        "SELECT v.item_id, v.value, min(v.study_id), count(*), sum(v.score), min(v.id) FROM "
        f"(SELECT a.item_id, a.study_id, a.id, coalesce(a.score, 0.0) AS score, "
        f"{value_sql(dialect, 'a')} AS value FROM annotations a WHERE {where}) v "
        "GROUP BY v.item_id, v.value"), params)
