"""leaderboard totals on PostgreSQL: every writer of an item's totals takes the item's lb_items
row first (created if missing), and recounts an answer with an upsert; lb_lock_items takes
many items' rows in item order for the bulk writers (app.leaderboards.totals.lock_totals)

Why (docs/data-model.md, "Locks"): a writer used to lock an item's lb_item_answers row
before its lb_items row, and a bulk writer went item by item in its own order, so
- an UPDATE recounting an (item, value) with DELETE then INSERT could meet a crowd answer of
  that value inserting the same row (a unique violation, or a deadlock);
- two transactions writing many annotations that share items could deadlock.
Now the item's lb_items row is the item's lock, taken before anything else of the item: the
one writer holding it recounts from a snapshot taken after the lock was granted (every answer
counted by an earlier holder is committed and seen; a later one adds itself after), and bulk
writers take all their items' rows at once, in item order, before writing.

SQLite (one writer at a time) keeps its triggers.

Revision ID: 0014
Revises: 0013
"""

import importlib.util
from pathlib import Path

from alembic import op


revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# An item's lb_items row is its lock. A placeholder (pattern '') stands in for an item without
# answers yet: its insert is the lock (a second inserter waits on it); lb_items_refresh
# (migration 0013) fills it or deletes it in the same transaction, so no reader sees one.
# DO UPDATE ... WHERE false locks an existing row without writing a new version of it.
FUNCTIONS = """
CREATE OR REPLACE FUNCTION lb_lock_items(ids integer[]) RETURNS void LANGUAGE sql AS $$
  INSERT INTO lb_items AS l (item_id, study_id, pattern, score)
  SELECT i.id, i.study_id, '', 0.0 FROM items i WHERE i.id = ANY(ids) ORDER BY i.id
  ON CONFLICT (item_id) DO UPDATE SET pattern = l.pattern WHERE false
$$;

CREATE OR REPLACE FUNCTION lb_recount(sid integer, iid integer, val text, field text) RETURNS void
LANGUAGE plpgsql AS $$
-- The caller holds the item's lb_items row: no other writer of this (item, value) is under
-- way, and this statement's snapshot sees every answer counted before.
DECLARE c integer; s double precision; f integer;
BEGIN
  SELECT count(*), sum(coalesce(a.score, 0.0)), min(a.id) INTO c, s, f FROM annotations a
  WHERE a.study_id = sid AND a.item_id = iid AND NOT a.is_gold AND NOT a.excluded
    AND lb_value(a.response, a.score, field) = val;
  IF c > 0 THEN
    INSERT INTO lb_item_answers AS t (item_id, value, study_id, n, score_sum, first_id)
    VALUES (iid, val, sid, c, s, f) ON CONFLICT (item_id, value)
    DO UPDATE SET n = EXCLUDED.n, score_sum = EXCLUDED.score_sum, first_id = EXCLUDED.first_id;
  ELSE
    DELETE FROM lb_item_answers WHERE item_id = iid AND value = val;
  END IF;
END $$;

CREATE OR REPLACE FUNCTION lb_annotations_totals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE cat text; clu text; f text; ocat text; oclu text; ofield text; old_ok boolean := false;
        new_ok boolean := false;
BEGIN
  IF TG_OP = 'INSERT' THEN
    SELECT i.category, i.cluster, s.answer_field INTO cat, clu, f
    FROM items i JOIN studies s ON s.id = i.study_id WHERE i.id = NEW.item_id;
    -- The item's lock first, as every writer of its totals takes it (migration 0014).
    INSERT INTO lb_items AS l (item_id, study_id, pattern, score)
    VALUES (NEW.item_id, NEW.study_id, '', 0.0)
    ON CONFLICT (item_id) DO UPDATE SET pattern = l.pattern WHERE false;
    PERFORM lb_worker(NEW.study_id, NEW.worker_id, cat, clu, coalesce(NEW.score, 0.0), 1);
    INSERT INTO lb_item_answers AS t (item_id, value, study_id, n, score_sum, first_id)
    VALUES (NEW.item_id, lb_value(NEW.response, NEW.score, f), NEW.study_id, 1,
            coalesce(NEW.score, 0.0), NEW.id)
    ON CONFLICT (item_id, value) DO UPDATE SET n = t.n + 1,
      score_sum = t.score_sum + EXCLUDED.score_sum, first_id = least(t.first_id, EXCLUDED.first_id);
    RETURN NULL;
  END IF;
  IF NOT OLD.is_gold AND NOT OLD.excluded THEN
    SELECT i.category, i.cluster, s.answer_field INTO ocat, oclu, ofield
    FROM items i JOIN studies s ON s.id = i.study_id WHERE i.id = OLD.item_id;
    old_ok := FOUND;  -- else the item or study is being deleted: its totals go with it
  END IF;
  IF TG_OP = 'UPDATE' AND NOT NEW.is_gold AND NOT NEW.excluded THEN
    SELECT i.category, i.cluster, s.answer_field INTO cat, clu, f
    FROM items i JOIN studies s ON s.id = i.study_id WHERE i.id = NEW.item_id;
    new_ok := true;
  END IF;
  -- The items' locks before any total, in item order (the old and new item may differ).
  IF old_ok OR new_ok THEN
    PERFORM lb_lock_items(ARRAY[CASE WHEN old_ok THEN OLD.item_id END,
                                CASE WHEN new_ok THEN NEW.item_id END]);
  END IF;
  IF old_ok THEN
    PERFORM lb_worker(OLD.study_id, OLD.worker_id, ocat, oclu, coalesce(OLD.score, 0.0), -1);
    PERFORM lb_recount(OLD.study_id, OLD.item_id, lb_value(OLD.response, OLD.score, ofield), ofield);
  END IF;
  IF new_ok THEN
    PERFORM lb_worker(NEW.study_id, NEW.worker_id, cat, clu, coalesce(NEW.score, 0.0), 1);
    PERFORM lb_recount(NEW.study_id, NEW.item_id, lb_value(NEW.response, NEW.score, f), f);
  END IF;
  -- An item whose last answer left earlier in this statement got a placeholder back above
  -- (its lock is still held: the deleted row's): none must outlive the statement.
  IF old_ok OR new_ok THEN
    DELETE FROM lb_items WHERE item_id IN (OLD.item_id, NEW.item_id) AND pattern = '';
  END IF;
  RETURN NULL;
END $$;
"""


def _m0011():
    path = Path(__file__).with_name("0011_leaderboard_totals.py")
    spec = importlib.util.spec_from_file_location("m0011_frozen", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(FUNCTIONS)


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # 0011's functions and triggers as they were (the totals they keep are the same).
    m0011 = _m0011()
    op.execute(m0011.PG_DROP)
    op.execute(m0011.PG_FUNCTIONS)
    op.execute("DROP FUNCTION lb_lock_items(integer[])")
