"""assignments: at most one live lease per bundle, as a unique partial index (the crowd hot
path's single statements rely on it: app/studies/hotpath.py)

Revision ID: 0011
Revises: 0010
"""
from alembic import op
import sqlalchemy as sa


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('uq_assignments_bundle_leased', 'assignments', ['bundle_id'], unique=True,
                    postgresql_where=sa.text("state = 'leased'"),
                    sqlite_where=sa.text("state = 'leased'"))


def downgrade() -> None:
    op.drop_index('uq_assignments_bundle_leased', table_name='assignments')
