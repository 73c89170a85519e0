"""Crowd block lists (issue 31): a researcher's block list on a platform (its id there) and the
workers they blocked.

Revision ID: 0021
Revises: 0020
"""

from alembic import op
import sqlalchemy as sa


revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("crowd_accounts") as batch:
        batch.add_column(sa.Column("block_group_id", sa.String(64), nullable=True))
    op.create_table(
        "crowd_blocks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("platform", sa.String(16), nullable=False),
        sa.Column("worker_id", sa.String(255), nullable=False),
        sa.Column("study_id", sa.Integer(), sa.ForeignKey("studies.id", ondelete="SET NULL"), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("user_id", "platform", "worker_id"),
    )
    op.create_index("ix_crowd_blocks_user_id", "crowd_blocks", ["user_id"])


def downgrade() -> None:
    op.drop_index("ix_crowd_blocks_user_id", table_name="crowd_blocks")
    op.drop_table("crowd_blocks")
    with op.batch_alter_table("crowd_accounts") as batch:
        batch.drop_column("block_group_id")
