"""The generation job is "navigation.generate", as every kind's is ("<kind>.generate").

Jobs already stored keep their state and history under the new name, so a queued or running
one is still found by its handler.

Revision ID: nav0004
Revises: nav0003
"""

from app.migration_ops import rename_jobs

revision = "nav0004"
down_revision = "nav0003"
branch_labels = None
depends_on = None

RENAME = ("navigation.generation", "navigation.generate")


def upgrade() -> None:
    rename_jobs([RENAME])


def downgrade() -> None:
    rename_jobs([RENAME[::-1]])
