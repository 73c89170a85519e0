"""The leaderboard's running totals are only as good as their triggers (docs/data-model.md): a
later migration that rebuilds `annotations` on SQLite (`batch_alter_table`) drops them without
a word, and every leaderboard after it would silently stop counting. Checked at the head of the
migrations on both backends, the database every deployment runs."""

from __future__ import annotations

from sqlalchemy import create_engine, text

ON_ANNOTATIONS = {"lb_annotations_insert", "lb_annotations_update", "lb_annotations_delete"}
ON_ITEM_ANSWERS = {"lb_items_insert", "lb_items_update", "lb_items_delete"}  # lb_items: PostgreSQL's


def _triggers(url: str, table: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            if url.startswith("sqlite"):
                rows = conn.execute(
                    text("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = :t"), {"t": table}
                )
            else:
                rows = conn.execute(
                    text("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal AND tgrelid = CAST(:t AS regclass)"),
                    {"t": table},
                )
            return {r[0] for r in rows}
    finally:
        engine.dispose()


def test_every_totals_trigger_is_there_after_the_last_migration(db_url):
    assert ON_ANNOTATIONS <= _triggers(db_url, "annotations")
    if db_url.startswith("postgresql"):
        assert ON_ITEM_ANSWERS <= _triggers(db_url, "lb_item_answers")
