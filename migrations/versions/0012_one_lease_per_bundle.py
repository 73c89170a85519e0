"""assignments: at most one live lease per bundle, as a unique partial index (the crowd hot
path's single statements rely on it: app/studies/hotpath.py)

Revision ID: 0012
Revises: 0011
"""

from alembic import op
import sqlalchemy as sa


revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A database from before may hold a bundle with two live leases (nothing forbade it): the
    # older ones are ended as the engine ends a lease (state expired, the item's capacity given
    # back), so that the index can be made; their late answers follow the engine's rules.
    older = sa.text("""
        SELECT a.id FROM assignments a
        WHERE a.state = 'leased' AND EXISTS (
            SELECT 1 FROM assignments b
            WHERE b.bundle_id = a.bundle_id AND b.state = 'leased' AND b.id > a.id)""")
    conn = op.get_bind()
    ids = [row[0] for row in conn.execute(older)]
    for i in ids:
        conn.execute(
            sa.text("""
            UPDATE items SET n_active = n_active - 1
            WHERE id = (SELECT item_id FROM assignments WHERE id = :id AND NOT is_gold)"""),
            {"id": i},
        )
        conn.execute(sa.text("UPDATE assignments SET state = 'expired' WHERE id = :id"), {"id": i})
    op.create_index(
        "uq_assignments_bundle_leased",
        "assignments",
        ["bundle_id"],
        unique=True,
        postgresql_where=sa.text("state = 'leased'"),
        sqlite_where=sa.text("state = 'leased'"),
    )


def downgrade() -> None:
    op.drop_index("uq_assignments_bundle_leased", table_name="assignments")
