"""Generation runs record nucleus sampling's p (top_p).

A run's N samples are drawn from the speaker by pure ancestral sampling (top_p = 1.0) or by
nucleus sampling (0 < top_p < 1, docs/kinds/navigation-generation.md). Runs stored before the
column existed were pure sampling, so the column is NOT NULL with a server default of 1.0.

Revision ID: nav0002
Revises: nav0001
"""

import sqlalchemy as sa
from alembic import op

revision = "nav0002"
down_revision = "nav0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("generation_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("top_p", sa.Float(), server_default=sa.text("1.0"), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("generation_runs", schema=None) as batch_op:
        batch_op.drop_column("top_p")
