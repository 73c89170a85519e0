"""leaderboard running totals: lb_worker_categories, lb_worker_clusters, lb_worker_consistency
and lb_item_answers,
kept by triggers on annotations (PostgreSQL: one PL/pgSQL function; SQLite: three triggers),
and backfilled from the annotations already stored; studies.answer_field (the response field
the per-item answers group by: the kind's agreement_value())

The statements are written out here, frozen with this revision: app/leaderboards/totals.py
holds the same backfill as `rebuild` (tests/integration/test_leaderboard_totals.py checks that
the triggers and the rebuild agree). SQLite note: a later batch_alter_table on `annotations`
recreates the table and drops its triggers; such a migration must create them again.

Revision ID: 0011
Revises: 0010
"""

from alembic import op
import sqlalchemy as sa


revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def _value(dialect: str, a: str) -> str:
    """The answer value of annotation row `a` (see app/leaderboards/models.py)."""
    field = f"(SELECT answer_field FROM studies WHERE id = {a}.study_id)"
    if dialect == "postgresql":
        score = f"(coalesce({a}.score, 0.0)::double precision)::text"
        answer = f"({a}.response ->> {field})"
    else:
        score = f"printf('%!.17g', coalesce({a}.score, 0.0))"
        answer = f"json_extract({a}.response, '$.\"' || {field} || '\"')"
    return f"coalesce('=' || CASE WHEN {field} IS NULL THEN {score} ELSE {answer} END, '')"


def _valid(a: str) -> str:
    return f"NOT {a}.is_gold AND NOT {a}.excluded"


def backfill_sql(dialect: str) -> list[str]:
    v = _value(dialect, "a")
    return [
        "INSERT INTO lb_worker_categories (study_id, worker_id, category, n, score_sum) "
        "SELECT a.study_id, a.worker_id, i.category, count(*), sum(coalesce(a.score, 0.0)) "
        f"FROM annotations a JOIN items i ON i.id = a.item_id WHERE {_valid('a')} "
        "GROUP BY a.study_id, a.worker_id, i.category",
        "INSERT INTO lb_worker_clusters (study_id, worker_id, cluster, n, n_right) "
        "SELECT a.study_id, a.worker_id, i.cluster, count(*), "
        "sum(CASE WHEN coalesce(a.score, 0.0) >= 1.0 THEN 1 ELSE 0 END) "
        f"FROM annotations a JOIN items i ON i.id = a.item_id WHERE {_valid('a')} AND i.cluster <> '' "
        "GROUP BY a.study_id, a.worker_id, i.cluster",
        "INSERT INTO lb_worker_consistency (study_id, worker_id, clusters_whole, clusters_right) "
        "SELECT c.study_id, c.worker_id, sum(CASE WHEN c.n = z.size THEN 1 ELSE 0 END), "
        "sum(CASE WHEN c.n = z.size AND c.n_right = z.size THEN 1 ELSE 0 END) "
        "FROM lb_worker_clusters c JOIN (SELECT study_id, cluster, count(*) AS size FROM items "
        "WHERE NOT is_gold GROUP BY study_id, cluster) z ON z.study_id = c.study_id AND z.cluster = c.cluster "
        "GROUP BY c.study_id, c.worker_id",
        "INSERT INTO lb_item_answers (item_id, value, study_id, n, score_sum, first_id) "
        f"SELECT v.item_id, v.value, min(v.study_id), count(*), sum(v.score), min(v.id) FROM "
        f"(SELECT a.item_id, a.study_id, a.id, coalesce(a.score, 0.0) AS score, {v} AS value "
        f"FROM annotations a WHERE {_valid('a')}) v GROUP BY v.item_id, v.value",
    ]


# PostgreSQL: one PL/pgSQL trigger function. An INSERT (the hot path) costs one lookup of the
# item and its study, three upserts and, for an item in a cluster, a count of the cluster's
# items (ix_items_study_cluster). lb_take / lb_put move a row's share in the worker totals on
# an UPDATE or DELETE; lb_recount recounts one (item, value) from the item's annotations
# (a handful of rows by ix_annotations_study_item), exact, and finds the next first id when
# the first one leaves.
PG_FUNCTIONS = """
CREATE FUNCTION lb_consistency(sid integer, wid integer, n0 integer, r0 integer, n1 integer,
                               r1 integer, size integer) RETURNS void LANGUAGE plpgsql AS $$
-- A worker's clusters seen whole and all right, as one cluster goes from (n0, r0) answers
-- and right ones to (n1, r1); size: the cluster's non-gold items.
DECLARE
  dw integer := (n1 = size)::integer - (n0 = size)::integer;
  dr integer := (n1 = size AND r1 = size)::integer - (n0 = size AND r0 = size)::integer;
BEGIN
  IF dw <> 0 OR dr <> 0 THEN
    INSERT INTO lb_worker_consistency AS t (study_id, worker_id, clusters_whole, clusters_right)
    VALUES (sid, wid, dw, dr) ON CONFLICT (study_id, worker_id)
    DO UPDATE SET clusters_whole = t.clusters_whole + EXCLUDED.clusters_whole,
                  clusters_right = t.clusters_right + EXCLUDED.clusters_right;
  END IF;
END $$;

CREATE FUNCTION lb_value(response jsonb, score double precision, field text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT coalesce('=' || CASE WHEN field IS NULL THEN coalesce(score, 0.0)::text
                              ELSE response ->> field END, '')
$$;

-- +1 or -1 of one annotation in the worker totals (category, cluster, consistency).
CREATE FUNCTION lb_worker(sid integer, wid integer, cat text, clu text, s double precision,
                          sign integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  r integer := CASE WHEN s >= 1.0 THEN 1 ELSE 0 END; nn integer; rr integer; size integer;
BEGIN
  IF sign > 0 THEN
    INSERT INTO lb_worker_categories AS t (study_id, worker_id, category, n, score_sum)
    VALUES (sid, wid, cat, 1, s) ON CONFLICT (study_id, worker_id, category)
    DO UPDATE SET n = t.n + 1, score_sum = t.score_sum + EXCLUDED.score_sum;
    IF clu <> '' THEN
      INSERT INTO lb_worker_clusters AS t (study_id, worker_id, cluster, n, n_right)
      VALUES (sid, wid, clu, 1, r) ON CONFLICT (study_id, worker_id, cluster)
      DO UPDATE SET n = t.n + 1, n_right = t.n_right + EXCLUDED.n_right
      RETURNING n, n_right INTO nn, rr;
      SELECT count(*) INTO size FROM items WHERE study_id = sid AND cluster = clu AND NOT is_gold;
      IF nn = size THEN  -- n never exceeds the size: only reaching it moves the counters
        PERFORM lb_consistency(sid, wid, nn - 1, rr - r, nn, rr, size);
      END IF;
    END IF;
  ELSE
    UPDATE lb_worker_categories SET n = n - 1, score_sum = score_sum - s
    WHERE study_id = sid AND worker_id = wid AND category = cat;
    DELETE FROM lb_worker_categories WHERE study_id = sid AND worker_id = wid AND category = cat AND n <= 0;
    IF clu <> '' THEN
      UPDATE lb_worker_clusters SET n = n - 1, n_right = n_right - r
      WHERE study_id = sid AND worker_id = wid AND cluster = clu RETURNING n, n_right INTO nn, rr;
      IF FOUND THEN
        SELECT count(*) INTO size FROM items WHERE study_id = sid AND cluster = clu AND NOT is_gold;
        PERFORM lb_consistency(sid, wid, nn + 1, rr + r, nn, rr, size);
      END IF;
      DELETE FROM lb_worker_clusters WHERE study_id = sid AND worker_id = wid AND cluster = clu AND n <= 0;
    END IF;
  END IF;
END $$;

CREATE FUNCTION lb_recount(sid integer, iid integer, val text, field text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM lb_item_answers WHERE item_id = iid AND value = val;
  INSERT INTO lb_item_answers (item_id, value, study_id, n, score_sum, first_id)
  SELECT iid, val, sid, count(*), sum(coalesce(a.score, 0.0)), min(a.id) FROM annotations a
  WHERE a.study_id = sid AND a.item_id = iid AND NOT a.is_gold AND NOT a.excluded
    AND lb_value(a.response, a.score, field) = val
  HAVING count(*) > 0;
END $$;

CREATE FUNCTION lb_annotations_totals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE cat text; clu text; f text;
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT i.category, i.cluster, s.answer_field INTO cat, clu, f
    FROM items i JOIN studies s ON s.id = i.study_id WHERE i.id = NEW.item_id;
    PERFORM lb_worker(NEW.study_id, NEW.worker_id, cat, clu, coalesce(NEW.score, 0.0), 1);
    INSERT INTO lb_item_answers AS t (item_id, value, study_id, n, score_sum, first_id)
    VALUES (NEW.item_id, lb_value(NEW.response, NEW.score, f), NEW.study_id, 1,
            coalesce(NEW.score, 0.0), NEW.id)
    ON CONFLICT (item_id, value) DO UPDATE SET n = t.n + 1,
      score_sum = t.score_sum + EXCLUDED.score_sum, first_id = least(t.first_id, EXCLUDED.first_id);
    RETURN NULL;
  END IF;
  IF NOT OLD.is_gold AND NOT OLD.excluded THEN
    SELECT i.category, i.cluster, s.answer_field INTO cat, clu, f
    FROM items i JOIN studies s ON s.id = i.study_id WHERE i.id = OLD.item_id;
    IF FOUND THEN  -- else the item or study is being deleted: its totals go with it
      PERFORM lb_worker(OLD.study_id, OLD.worker_id, cat, clu, coalesce(OLD.score, 0.0), -1);
      PERFORM lb_recount(OLD.study_id, OLD.item_id, lb_value(OLD.response, OLD.score, f), f);
    END IF;
  END IF;
  IF TG_OP = 'UPDATE' AND NOT NEW.is_gold AND NOT NEW.excluded THEN
    SELECT i.category, i.cluster, s.answer_field INTO cat, clu, f
    FROM items i JOIN studies s ON s.id = i.study_id WHERE i.id = NEW.item_id;
    PERFORM lb_worker(NEW.study_id, NEW.worker_id, cat, clu, coalesce(NEW.score, 0.0), 1);
    PERFORM lb_recount(NEW.study_id, NEW.item_id, lb_value(NEW.response, NEW.score, f), f);
  END IF;
  RETURN NULL;
END $$;

-- Only valid annotations count: the WHEN keeps the function out of gold and excluded inserts.
CREATE TRIGGER lb_annotations_insert AFTER INSERT ON annotations
FOR EACH ROW WHEN (NOT NEW.is_gold AND NOT NEW.excluded) EXECUTE FUNCTION lb_annotations_totals();
CREATE TRIGGER lb_annotations_update
AFTER UPDATE OF excluded, score, is_gold, response, item_id, worker_id, study_id ON annotations
FOR EACH ROW WHEN (OLD.excluded IS DISTINCT FROM NEW.excluded OR OLD.score IS DISTINCT FROM NEW.score
  OR OLD.is_gold IS DISTINCT FROM NEW.is_gold OR OLD.response IS DISTINCT FROM NEW.response
  OR OLD.item_id IS DISTINCT FROM NEW.item_id OR OLD.worker_id IS DISTINCT FROM NEW.worker_id
  OR OLD.study_id IS DISTINCT FROM NEW.study_id)
EXECUTE FUNCTION lb_annotations_totals();
CREATE TRIGGER lb_annotations_delete AFTER DELETE ON annotations
FOR EACH ROW EXECUTE FUNCTION lb_annotations_totals();
"""

PG_DROP = """
DROP TRIGGER IF EXISTS lb_annotations_delete ON annotations;
DROP TRIGGER IF EXISTS lb_annotations_update ON annotations;
DROP TRIGGER IF EXISTS lb_annotations_insert ON annotations;
DROP FUNCTION IF EXISTS lb_annotations_totals();
DROP FUNCTION IF EXISTS lb_recount(integer, integer, text, text);
DROP FUNCTION IF EXISTS lb_worker(integer, integer, text, text, double precision, integer);
DROP FUNCTION IF EXISTS lb_value(jsonb, double precision, text);
DROP FUNCTION IF EXISTS lb_consistency(integer, integer, integer, integer, integer, integer, integer);
"""


def _sqlite_add(r: str) -> list[str]:
    """Statements that add annotation row `r` (NEW or OLD) to the worker totals."""
    return [
        "INSERT INTO lb_worker_categories (study_id, worker_id, category, n, score_sum) "
        f"SELECT {r}.study_id, {r}.worker_id, i.category, 1, coalesce({r}.score, 0.0) "
        f"FROM items i WHERE i.id = {r}.item_id AND {_valid(r)} "
        "ON CONFLICT (study_id, worker_id, category) "
        "DO UPDATE SET n = n + 1, score_sum = score_sum + excluded.score_sum",
        "INSERT INTO lb_worker_clusters (study_id, worker_id, cluster, n, n_right) "
        f"SELECT {r}.study_id, {r}.worker_id, i.cluster, 1, "
        f"CASE WHEN coalesce({r}.score, 0.0) >= 1.0 THEN 1 ELSE 0 END "
        f"FROM items i WHERE i.id = {r}.item_id AND i.cluster <> '' AND {_valid(r)} "
        "ON CONFLICT (study_id, worker_id, cluster) "
        "DO UPDATE SET n = n + 1, n_right = n_right + excluded.n_right",
        _sqlite_consistency(r, "c.n - 1", f"c.n_right - {_right(r)}", "c.n", "c.n_right"),
    ]


def _right(r: str) -> str:
    return f"(CASE WHEN coalesce({r}.score, 0.0) >= 1.0 THEN 1 ELSE 0 END)"


def _sqlite_consistency(r: str, n0: str, r0: str, n1: str, r1: str) -> str:
    """The worker's clusters seen whole and all right, as the cluster of row `r` (its
    lb_worker_clusters row c, already updated) went from (n0, r0) to (n1, r1)."""
    clu = f"(SELECT cluster FROM items WHERE id = {r}.item_id)"
    return (
        "INSERT INTO lb_worker_consistency (study_id, worker_id, clusters_whole, clusters_right) "
        f"SELECT c.study_id, c.worker_id, ({n1} = z.size) - ({n0} = z.size), "
        f"({n1} = z.size AND {r1} = z.size) - ({n0} = z.size AND {r0} = z.size) "
        f"FROM lb_worker_clusters c, (SELECT count(*) AS size FROM items WHERE study_id = {r}.study_id "
        f"AND cluster = {clu} AND NOT is_gold) z "
        f"WHERE c.study_id = {r}.study_id AND c.worker_id = {r}.worker_id AND c.cluster = {clu} AND {_valid(r)} "
        "ON CONFLICT (study_id, worker_id) DO UPDATE SET "
        "clusters_whole = clusters_whole + excluded.clusters_whole, "
        "clusters_right = clusters_right + excluded.clusters_right"
    )


def _sqlite_take(r: str) -> list[str]:
    """Statements that take annotation row `r` out of the worker totals."""
    key = f"study_id = {r}.study_id AND worker_id = {r}.worker_id AND {_valid(r)}"
    cat = f"category = (SELECT category FROM items WHERE id = {r}.item_id)"
    clu = f"cluster = (SELECT cluster FROM items WHERE id = {r}.item_id)"
    right = f"CASE WHEN coalesce({r}.score, 0.0) >= 1.0 THEN 1 ELSE 0 END"
    return [
        f"UPDATE lb_worker_categories SET n = n - 1, score_sum = score_sum - coalesce({r}.score, 0.0) "
        f"WHERE {key} AND {cat}",
        f"DELETE FROM lb_worker_categories WHERE {key} AND {cat} AND n <= 0",
        f"UPDATE lb_worker_clusters SET n = n - 1, n_right = n_right - {right} WHERE {key} AND {clu}",
        _sqlite_consistency(r, "c.n + 1", f"c.n_right + {_right(r)}", "c.n", "c.n_right"),
        f"DELETE FROM lb_worker_clusters WHERE {key} AND {clu} AND n <= 0",
    ]


def _sqlite_recount(r: str) -> list[str]:
    """Recount the (item, value) of annotation row `r` from the annotations."""
    v = _value("sqlite", r)
    return [
        f"DELETE FROM lb_item_answers WHERE item_id = {r}.item_id AND value = {v}",
        "INSERT INTO lb_item_answers (item_id, value, study_id, n, score_sum, first_id) "
        f"SELECT {r}.item_id, {v}, {r}.study_id, count(*), sum(coalesce(a.score, 0.0)), min(a.id) "
        f"FROM annotations a WHERE a.study_id = {r}.study_id AND a.item_id = {r}.item_id "
        f"AND {_valid('a')} AND {_value('sqlite', 'a')} = {v} "
        f"AND EXISTS (SELECT 1 FROM items WHERE id = {r}.item_id) HAVING count(*) > 0",
    ]


def sqlite_triggers() -> list[str]:
    v = _value("sqlite", "NEW")
    insert = _sqlite_add("NEW") + [
        "INSERT INTO lb_item_answers (item_id, value, study_id, n, score_sum, first_id) "
        f"SELECT NEW.item_id, {v}, NEW.study_id, 1, coalesce(NEW.score, 0.0), NEW.id WHERE true "
        "ON CONFLICT (item_id, value) DO UPDATE SET n = n + 1, "
        "score_sum = score_sum + excluded.score_sum, first_id = min(first_id, excluded.first_id)"
    ]
    changed = " OR ".join(
        f"OLD.{c} IS NOT NEW.{c}"
        for c in ("excluded", "score", "is_gold", "response", "item_id", "worker_id", "study_id")
    )
    update = _sqlite_take("OLD") + _sqlite_add("NEW") + _sqlite_recount("OLD") + _sqlite_recount("NEW")
    delete = _sqlite_take("OLD") + _sqlite_recount("OLD")
    body = lambda stmts: "BEGIN\n" + "".join(f"  {s};\n" for s in stmts) + "END"  # noqa: E731
    return [
        f"CREATE TRIGGER lb_annotations_insert AFTER INSERT ON annotations "
        f"WHEN NOT NEW.is_gold AND NOT NEW.excluded {body(insert)}",
        "CREATE TRIGGER lb_annotations_update AFTER UPDATE OF excluded, score, is_gold, response, "
        f"item_id, worker_id, study_id ON annotations WHEN {changed} {body(update)}",
        f"CREATE TRIGGER lb_annotations_delete AFTER DELETE ON annotations {body(delete)}",
    ]


def upgrade() -> None:
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.add_column(sa.Column("answer_field", sa.String(length=64), nullable=True))
    op.create_table(
        "lb_worker_categories",
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("category", sa.String(length=64), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("score_sum", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_lb_worker_categories_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("study_id", "worker_id", "category", name=op.f("pk_lb_worker_categories")),
    )
    op.create_table(
        "lb_worker_clusters",
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("cluster", sa.String(length=255), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("n_right", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_lb_worker_clusters_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("study_id", "worker_id", "cluster", name=op.f("pk_lb_worker_clusters")),
    )
    op.create_table(
        "lb_worker_consistency",
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.Integer(), nullable=False),
        sa.Column("clusters_whole", sa.Integer(), nullable=False),
        sa.Column("clusters_right", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_lb_worker_consistency_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("study_id", "worker_id", name=op.f("pk_lb_worker_consistency")),
    )
    # The triggers count a cluster's items when a worker's answers in it change.
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.create_index("ix_items_study_cluster", ["study_id", "cluster"], unique=False)
    op.create_table(
        "lb_item_answers",
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("score_sum", sa.Float(), nullable=False),
        sa.Column("first_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["item_id"], ["items.id"], name=op.f("fk_lb_item_answers_item_id_items"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_lb_item_answers_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("item_id", "value", name=op.f("pk_lb_item_answers")),
    )
    op.create_index("ix_lb_item_answers_study_item", "lb_item_answers", ["study_id", "item_id"], unique=False)

    bind = op.get_bind()
    dialect = bind.dialect.name
    # Studies already stored group their answers by their kind's field (kinds not installed
    # here keep NULL; the leaderboard rebuilds such a study's answers when it first sees it).
    try:
        from app.kinds import all_kinds

        fields = {name: k.agreement_value() for name, k in all_kinds().items()}
    except Exception:  # noqa: BLE001 - no kinds loadable: every study keeps NULL
        fields = {}
    for name, field in fields.items():
        if field is not None:
            bind.execute(sa.text("UPDATE studies SET answer_field = :f WHERE kind = :k"), {"f": field, "k": name})
    if dialect == "postgresql":
        bind.exec_driver_sql(PG_FUNCTIONS)
    else:
        for stmt in sqlite_triggers():
            bind.exec_driver_sql(stmt)
    for stmt in backfill_sql(dialect):
        bind.exec_driver_sql(stmt)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql(PG_DROP)
    else:
        for name in ("lb_annotations_delete", "lb_annotations_update", "lb_annotations_insert"):
            bind.exec_driver_sql(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_index("ix_lb_item_answers_study_item", table_name="lb_item_answers")
    op.drop_table("lb_item_answers")
    op.drop_table("lb_worker_consistency")
    with op.batch_alter_table("items", schema=None) as batch_op:
        batch_op.drop_index("ix_items_study_cluster")
    op.drop_table("lb_worker_clusters")
    op.drop_table("lb_worker_categories")
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.drop_column("answer_field")
