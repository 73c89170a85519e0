"""Crowd allow lists and hooks (issue 31): a researcher's allow list on a platform (its id
there and the rule that feeds it from the workers' records) and the secret the platform signs
its hooks with (sealed).

Revision ID: 0022
Revises: 0021
"""

from alembic import op
import sqlalchemy as sa


revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("crowd_accounts") as batch:
        batch.add_column(sa.Column("allow_group_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("allow_rule", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("hook_secret_sealed", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("crowd_accounts") as batch:
        batch.drop_column("hook_secret_sealed")
        batch.drop_column("allow_rule")
        batch.drop_column("allow_group_id")
