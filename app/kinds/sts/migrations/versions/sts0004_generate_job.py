"""The generation job is "sts.generate", as every kind's is ("<kind>.generate").

Jobs already stored keep their state and history under the new name, so a queued or running
one is still found by its handler.

Revision ID: sts0004
Revises: sts0003
"""

from app.migration_ops import rename_jobs

revision = "sts0004"
down_revision = "sts0003"
branch_labels = None
depends_on = None

RENAME = ("sts.generation", "sts.generate")


def upgrade() -> None:
    rename_jobs([RENAME])


def downgrade() -> None:
    rename_jobs([RENAME[::-1]])
