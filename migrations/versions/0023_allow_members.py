"""The allow list's members as last kept (issue 31): the sweeper keeps each researcher's allow
list on a platform as the workers' records change, and calls the platform only when the rule
picks other workers than at the last sync.

Revision ID: 0023
Revises: 0022
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("crowd_accounts") as batch:
        batch.add_column(sa.Column("allow_members", JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("crowd_accounts") as batch:
        batch.drop_column("allow_members")
