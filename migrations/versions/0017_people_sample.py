"""People judge a random sample of a study's items (the rest only by an automatic judge):
items.for_people (the engine leases only these) and studies.people_sample (how it was drawn).

Revision ID: 0017
Revises: 0016
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql


revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD and DROP COLUMN (no batch copy): SQLite's triggers on these tables (the
    # leaderboard totals) would break on a table made anew.
    op.add_column("items", sa.Column("for_people", sa.Boolean(), nullable=False, server_default=sa.true()))
    op.add_column(
        "studies",
        sa.Column("people_sample", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("studies", "people_sample")
    op.drop_column("items", "for_people")
