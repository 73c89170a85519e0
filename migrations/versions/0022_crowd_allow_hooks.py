"""Crowd allow lists, hooks and the comprehension check (issue 31): a researcher's allow list
on a platform (its id there and the rule that feeds it from the workers' records), the secret
the platform signs its hooks with (sealed), a study's comprehension check and each bundle's
attempts at it.

Revision ID: 0022
Revises: 0021
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("crowd_accounts") as batch:
        batch.add_column(sa.Column("allow_group_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("allow_rule", JSON, nullable=True))
        batch.add_column(sa.Column("hook_secret_sealed", sa.Text(), nullable=True))
    # Plain ADD COLUMN (no batch copy), as 0018 and 0020: SQLite's triggers on these tables stay.
    op.add_column("studies", sa.Column("comprehension", JSON, nullable=True))
    op.add_column("bundles", sa.Column("check_failures", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("bundles", sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("bundles", "checked_at")
    op.drop_column("bundles", "check_failures")
    op.drop_column("studies", "comprehension")
    with op.batch_alter_table("crowd_accounts") as batch:
        batch.drop_column("hook_secret_sealed")
        batch.drop_column("allow_rule")
        batch.drop_column("allow_group_id")
