"""Navigation's own migration branch begins: its jobs are named by the kind.

The generation pipeline moved from the shared agents package into the navigation kind, and a
kind's jobs are registered as "<kind>.<job>" (TaskKind.jobs). Jobs already stored keep their
history under the new names, so a queued or running one is still found by its handler. The
tables (environments, generation_*) keep their names: they were made by the core's 0002-0005,
before kinds owned their tables.

Revision ID: nav0001
Revises: (the base of the navigation branch; depends on core 0005)
"""

import sqlalchemy as sa
from alembic import op

revision = "nav0001"
down_revision = None
branch_labels = ("navigation",)
depends_on = "0005"

RENAMES = (("generation", "navigation.generation"), ("agent.validate", "navigation.validate"))


def upgrade() -> None:
    for old, new in RENAMES:
        op.execute(sa.text("UPDATE jobs SET task = :new WHERE task = :old").bindparams(old=old, new=new))


def downgrade() -> None:
    for old, new in RENAMES:
        op.execute(sa.text("UPDATE jobs SET task = :old WHERE task = :new").bindparams(old=old, new=new))
