"""Navigation's own migration branch begins: its jobs are named by the kind.

The generation pipeline moved from the shared agents package into the navigation kind, and a
kind's jobs are registered as "<kind>.<job>" (TaskKind.jobs). Jobs already stored keep their
history under the new names, so a queued or running one is still found by its handler. The
tables (environments, generation_*) keep their names: they were made by the core's 0002-0005,
before kinds owned their tables.

Revision ID: nav0001
Revises: (the base of the navigation branch; depends on core 0005)
"""

from app.migration_ops import rename_jobs

revision = "nav0001"
down_revision = None
branch_labels = ("navigation",)
depends_on = "0005"

RENAMES = (("generation", "navigation.generation"), ("agent.validate", "navigation.validate"))


def upgrade() -> None:
    rename_jobs(RENAMES)


def downgrade() -> None:
    rename_jobs((new, old) for old, new in RENAMES)
