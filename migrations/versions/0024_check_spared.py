"""A task spared the comprehension check (issue 31): a check turned on mid-study spares the
tasks already under way, and only them; before, they were stamped as passed, which since one
record serves all of a worker's tasks let such a worker skip the check in later tasks too.

Revision ID: 0024
Revises: 0023
"""

from alembic import op
import sqlalchemy as sa

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("bundles") as batch:
        batch.add_column(sa.Column("check_spared", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("bundles") as batch:
        batch.drop_column("check_spared")
