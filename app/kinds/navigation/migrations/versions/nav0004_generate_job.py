"""The generation job is "navigation.generate", as every kind's is ("<kind>.generate").

Jobs already stored keep their state and history under the new name, so a queued or running
one is still found by its handler.

Revision ID: nav0004
Revises: nav0003
"""

import sqlalchemy as sa
from alembic import op

revision = "nav0004"
down_revision = "nav0003"
branch_labels = None
depends_on = None

OLD, NEW = "navigation.generation", "navigation.generate"


def upgrade() -> None:
    op.execute(sa.text("UPDATE jobs SET task = :new WHERE task = :old").bindparams(old=OLD, new=NEW))


def downgrade() -> None:
    op.execute(sa.text("UPDATE jobs SET task = :old WHERE task = :new").bindparams(old=OLD, new=NEW))
