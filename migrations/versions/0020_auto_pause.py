"""Auto-pause (issue 29, "Stop"): studies.auto_pause, the comparisons the researcher marked
(pairs of agents); the sweeper pauses a live study when every one of them is settled
(app/leaderboards/stopping.py) and writes when in studies.auto_paused_at.

Revision ID: 0020
Revises: 0019
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql


revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMN (no batch copy), as 0018: SQLite's triggers on studies stay.
    op.add_column(
        "studies", sa.Column("auto_pause", sa.JSON().with_variant(postgresql.JSONB(), "postgresql"), nullable=True)
    )
    op.add_column("studies", sa.Column("auto_paused_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("studies", "auto_paused_at")
    op.drop_column("studies", "auto_pause")
