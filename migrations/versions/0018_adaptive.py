"""Adaptive allocation (issue 29.2): items.priority, written by the periodic job
(app/leaderboards/adaptive.py) and read by the engine's pick and the hot path's lease where the
study's studies.adaptive is on; studies.adaptive_floor, the annotations every item gets before
any item gets more.

Revision ID: 0018
Revises: 0017
"""

from alembic import op
import sqlalchemy as sa


revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD and DROP COLUMN (no batch copy): SQLite's triggers on these tables (the
    # leaderboard totals) would break on a table made anew.
    op.add_column("items", sa.Column("priority", sa.Float(), nullable=False, server_default="0"))
    # The lease's order where adaptive allocation is on, walked backwards (hotpath.NEXT_SQL).
    op.create_index("ix_items_priority", "items", ["study_id", "is_gold", "priority", "n_active", "position"])
    op.add_column("studies", sa.Column("adaptive", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.add_column("studies", sa.Column("adaptive_floor", sa.Integer(), nullable=False, server_default="1"))


def downgrade() -> None:
    op.drop_column("studies", "adaptive_floor")
    op.drop_column("studies", "adaptive")
    op.drop_index("ix_items_priority", "items")
    op.drop_column("items", "priority")
