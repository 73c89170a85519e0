"""lb_items: per item, the answer-count pattern and the winning answer's score, kept from
lb_item_answers by statement triggers (PostgreSQL; SQLite keeps the table empty and its
leaderboard groups lb_item_answers per view)

Revision ID: 0013
Revises: 0012
"""

from alembic import op
import sqlalchemy as sa


revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

# The item's summary from its (item, answer) rows with n > 0; the same definitions as
# app.leaderboards.service's patterns and majority: the pattern lists "n:length:value" per
# answer in value order, the winner has the most answers, then the earliest first answer.
SUMMARY = """
SELECT a.item_id, min(a.study_id) AS study_id,
       string_agg(a.n::text || ':' || length(a.value)::text || ':' || a.value, ',' ORDER BY a.value)
         AS pattern,
       (array_agg(a.score_sum / a.n ORDER BY a.n DESC, a.first_id))[1] AS score
FROM lb_item_answers a WHERE a.n > 0 {where} GROUP BY a.item_id"""

# Writers of one item's answers take its lb_items row lock first (in item order), then
# recount it in a later statement, whose READ COMMITTED snapshot sees every answer committed
# before the lock was granted: two answers to one item at once cannot both write a summary
# that misses the other (an UPDATE that waited on the row would re-check the row but not
# re-read the answers). A row lock, not an advisory lock: a rebuild touches 100k items.
FUNCTION = (
    """
CREATE FUNCTION lb_items_refresh() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- An upsert fires both the INSERT and the UPDATE statement triggers, one of them empty.
  IF NOT EXISTS (SELECT 1 FROM changed) THEN
    RETURN NULL;
  END IF;
  INSERT INTO lb_items (item_id, study_id, pattern, score)
    SELECT DISTINCT a.item_id, a.study_id, '', 0.0 FROM lb_item_answers a
    WHERE a.item_id IN (SELECT item_id FROM changed) AND a.n > 0
    ORDER BY a.item_id
    ON CONFLICT (item_id) DO NOTHING;
  PERFORM 1 FROM lb_items WHERE item_id IN (SELECT item_id FROM changed)
    ORDER BY item_id FOR UPDATE;
  UPDATE lb_items l SET pattern = s.pattern, score = s.score
    FROM ("""
    + SUMMARY.format(where="AND a.item_id IN (SELECT item_id FROM changed)")
    + """) s
    WHERE l.item_id = s.item_id AND (l.pattern, l.score) IS DISTINCT FROM (s.pattern, s.score);
  DELETE FROM lb_items l WHERE l.item_id IN (SELECT item_id FROM changed)
    AND NOT EXISTS (SELECT 1 FROM lb_item_answers a WHERE a.item_id = l.item_id AND a.n > 0);
  RETURN NULL;
END $$"""
)

TRIGGERS = [
    "CREATE TRIGGER lb_items_insert AFTER INSERT ON lb_item_answers "
    "REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION lb_items_refresh()",
    "CREATE TRIGGER lb_items_update AFTER UPDATE ON lb_item_answers "
    "REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION lb_items_refresh()",
    "CREATE TRIGGER lb_items_delete AFTER DELETE ON lb_item_answers "
    "REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION lb_items_refresh()",
]


def upgrade() -> None:
    op.create_table(
        "lb_items",
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("pattern", sa.Text(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["item_id"], ["items.id"], name=op.f("fk_lb_items_item_id_items"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["study_id"], ["studies.id"], name=op.f("fk_lb_items_study_id_studies"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("item_id", name=op.f("pk_lb_items")),
    )
    op.create_index("ix_lb_items_study", "lb_items", ["study_id"])
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("INSERT INTO lb_items (item_id, study_id, pattern, score) " + SUMMARY.format(where=""))
    op.execute(FUNCTION)
    for stmt in TRIGGERS:
        op.execute(stmt)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for name in ("lb_items_insert", "lb_items_update", "lb_items_delete"):
            op.execute(f"DROP TRIGGER {name} ON lb_item_answers")
        op.execute("DROP FUNCTION lb_items_refresh()")
    op.drop_index("ix_lb_items_study", table_name="lb_items")
    op.drop_table("lb_items")
