"""jobs: how many times a worker has claimed each (the sweeper gives up after a few)

Revision ID: 0006
Revises: 0005
"""

from alembic import op
import sqlalchemy as sa


revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Jobs already stored count as claimed once if they ever started.
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("attempts", sa.Integer(), server_default="0", nullable=False))
    op.execute("UPDATE jobs SET attempts = 1 WHERE started_at IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("attempts")
